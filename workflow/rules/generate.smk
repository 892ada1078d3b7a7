# Synthetic trace sets written to files: only the generated workloads that keep their files
# (keep_traces: true) or that replay or a transform reads; the others are generated in memory by
# their shard jobs (chakra_pipe.sweep.generated), with no rank file and no validate job.


rule generate:
    output:
        directory(f"{TRACES}/{{workload}}/et"),
    log:
        f"{LOGS}/generate/{{workload}}.log",
    wildcard_constraints:
        workload=name_pattern(CAMPAIGN.written()),
    conda:
        "../envs/chakra-pipe.yaml"
    params:
        args=lambda wc: workload(wc).generate_args(),
        prefix=lambda wc: workload(wc).prefix,
    shell:
        "(mkdir -p {output:q} && chakra-pipe generate {params.args:q} --out {params.prefix:q}) > {log:q} 2>&1"
