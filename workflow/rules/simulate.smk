# The hardware grid: plan.json (written while the DAG is planned, see common.smk) fixes the points and
# shards; each shard job loads its trace set once and simulates every point of the shard. A shard
# reruns when its own points change (params digest) or its trace does, not whenever plan.json changes
# for an unrelated config edit (ancient).


rule simulate_shard:
    input:
        plan=ancient(CAMPAIGN.plan_path),
        trace=trace_input,
        validated=f"{DATA}/validate/{{workload}}.txt",
    output:
        f"{DATA}/shards/{{workload}}/{{shard}}.csv",
    params:
        prefix=lambda wc: workload(wc).prefix,
        points=lambda wc: CAMPAIGN.shard_digest(wc.workload, int(wc.shard)),
    resources:
        mem_mb=2000,
        runtime=60,
    conda:
        "../envs/chakra-pipe.yaml"
    log:
        f"{LOGS}/simulate/{{workload}}.{{shard}}.log",
    shell:
        "chakra-pipe sweep run --plan {input.plan:q} --workload {wildcards.workload:q} --shard {wildcards.shard:q}"
        " --trace {params.prefix:q} --out {output:q} 2> {log:q}"
