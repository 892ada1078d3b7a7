# What-if variants of other workloads: `chakra-pipe transform` on the source's rank set, one job per
# combination of the transform axes (workloads of kind "transform" in the plan).


rule transform:
    input:
        lambda wc: trace_files(workload(wc).spec["source"]),
    output:
        directory(f"{TRACES}/{{workload}}/et"),
    log:
        f"{LOGS}/transform/{{workload}}.log",
    wildcard_constraints:
        workload=name_pattern(CAMPAIGN.of_kind("transform")),
    conda:
        "../envs/chakra-pipe.yaml"
    params:
        source=lambda wc: CAMPAIGN.workloads[workload(wc).spec["source"]].prefix,
        prefix=lambda wc: workload(wc).prefix,
        ops=lambda wc: workload(wc).spec["args"],
    shell:
        "(mkdir -p {output:q} && chakra-pipe transform {params.source:q} {params.prefix:q} {params.ops:q})"
        " > {log:q} 2>&1"
