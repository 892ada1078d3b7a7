# The hardware grid: plan.json (written while the DAG is planned, see common.smk) fixes the points and
# shards; each shard job loads its trace set once (or generates it in memory: no rank files, no
# validate job) and simulates every point of the shard. A shard reruns when its own points or
# generator options change (params digest) or its trace does, not whenever plan.json changes for an
# unrelated config edit (ancient).


rule simulate_shard:
    input:
        plan=ancient(PLAN),
        trace=trace_input,
        validated=validated_input,
        calibrated=lambda wc: CAMPAIGN.shard_calibrations(wc.workload, int(wc.shard)),
    output:
        f"{DATA}/shards/{{workload}}/{{shard}}.csv",
    log:
        f"{LOGS}/simulate/{{workload}}.{{shard}}.log",
    conda:
        "../envs/chakra-pipe.yaml"
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        trace=trace_option,
        points=lambda wc: CAMPAIGN.shard_digest(wc.workload, int(wc.shard)),
    shell:
        "chakra-pipe sweep run --plan {input.plan:q} --workload {wildcards.workload:q} --shard {wildcards.shard:q}"
        " {params.trace:q} --out {output:q} > {log:q} 2>&1"
