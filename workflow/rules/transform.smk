# What-if variants of other workloads: `chakra-pipe transform` on the source's rank set, one job per
# combination of the transform axes (workloads of kind "transform" in the plan).


def transform_source(wildcards):
    """The source workload's rank files (an existing set) or the folder its rule writes."""
    source = CAMPAIGN.workloads[workload(wildcards).spec["source"]]
    if source.kind == "trace":
        return [f"{source.prefix}.{r}.et" for r in range(source.npus)]
    return f"{TRACES}/{source.name}/et"


rule transform:
    input:
        transform_source,
    output:
        directory(f"{TRACES}/{{workload}}/et"),
    wildcard_constraints:
        workload=name_pattern(CAMPAIGN.of_kind("transform")),
    params:
        source=lambda wc: CAMPAIGN.workloads[workload(wc).spec["source"]].prefix,
        prefix=lambda wc: workload(wc).prefix,
        ops=lambda wc: workload(wc).spec["args"],
    conda:
        "../envs/chakra-pipe.yaml"
    log:
        f"{LOGS}/transform/{{workload}}.log",
    shell:
        "mkdir -p {output:q} && chakra-pipe transform {params.source:q} {params.prefix:q} {params.ops:q} > {log:q} 2>&1"
