# chakra-pipe campaign workflow: traces -> validate -> simulate (hardware-grid shards) -> replay -> report.
# Thin on purpose: config validation and wiring only; every step is a `chakra-pipe` command.
# Quick start and config reference: workflow/README.md.
from snakemake.utils import min_version, validate

min_version("9.0")


# The default campaign, unless --configfile names another one (which then stands alone, not merged).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/generate.smk"
include: "workflow/rules/capture.smk"
include: "workflow/rules/transform.smk"
include: "workflow/rules/validate.smk"
include: "workflow/rules/simulate.smk"
include: "workflow/rules/search.smk"
include: "workflow/rules/replay.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        final_outputs(),
    default_target: True
