# Synthetic trace sets: collective microbenchmarks and LLM training steps.


rule generate:
    output:
        directory(f"{TRACES}/{{workload}}/et"),
    log:
        f"{LOGS}/generate/{{workload}}.log",
    wildcard_constraints:
        workload=name_pattern(CAMPAIGN.of_kind("collective", "llm")),
    conda:
        "../envs/chakra-pipe.yaml"
    params:
        args=lambda wc: workload(wc).generate_args(),
        prefix=lambda wc: workload(wc).prefix,
    shell:
        "(mkdir -p {output:q} && chakra-pipe generate {params.args:q} --out {params.prefix:q}) > {log:q} 2>&1"
