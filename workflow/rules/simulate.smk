# The hardware grid: plan.json fixes the points and shards; each shard job loads its trace set once
# and simulates every point of the shard.


rule plan:
    output:
        CAMPAIGN.plan_path,
    params:
        config_sha256=CAMPAIGN.config_sha256,
    conda:
        "../envs/chakra-pipe.yaml"
    log:
        f"{LOGS}/plan.log",
    localrule: True
    script:
        "../scripts/plan.py"


rule simulate_shard:
    input:
        plan=CAMPAIGN.plan_path,
        trace=trace_input,
        validated=f"{DATA}/validate/{{workload}}.txt",
    output:
        f"{DATA}/shards/{{workload}}/{{shard}}.csv",
    params:
        prefix=lambda wc: workload(wc).prefix,
    resources:
        mem_mb=2000,
        runtime=60,
    conda:
        "../envs/chakra-pipe.yaml"
    log:
        f"{LOGS}/simulate/{{workload}}.{{shard}}.log",
    shell:
        "chakra-pipe sweep run --plan {input.plan} --workload {wildcards.workload} --shard {wildcards.shard}"
        " --trace {params.prefix} --out {output} 2> {log}"
