# Measured platforms: calibrate this machine's collectives (through the replay engine) and fit the
# network.yml + system.json their grid points are simulated on. The plan names the files (a point's
# `calibrated` folder) and the shard jobs take them as inputs, so no checkpoint is needed.
# Only in the DAG when a platform declares `calibrate:`.


rule calibrate:
    output:
        network=f"{DATA}/calibrate/{{platform}}/network.yml",
        system=f"{DATA}/calibrate/{{platform}}/system.json",
        fit=f"{DATA}/calibrate/{{platform}}/fit.json",
    log:
        f"{LOGS}/calibrate/{{platform}}.log",
    wildcard_constraints:
        platform=name_pattern(list(CAMPAIGN.calibrations)),
    conda:
        "../envs/chakra-pipe.yaml"
    threads: lambda wc: CAMPAIGN.calibrations[wc.platform]["ranks"]
    resources:
        mem_mb=lambda wc: 1000 + 1000 * CAMPAIGN.calibrations[wc.platform]["ranks"],
        gpu=lambda wc: CAMPAIGN.calibrations[wc.platform]["ranks"]
        * config.get("cluster", {}).get("gpus_per_rank", 0),
    params:
        args=lambda wc: CAMPAIGN.calibrate_args(wc.platform),
        out=lambda wc: CAMPAIGN.calibrate_dir(wc.platform),
    shell:
        "chakra-pipe calibrate {params.args:q} --out {params.out:q} > {log:q} 2>&1"
