# Synthetic trace sets: collective microbenchmarks and LLM training steps.


rule generate:
    output:
        directory(f"{TRACES}/{{workload}}/et"),
    wildcard_constraints:
        workload=name_pattern(CAMPAIGN.of_kind("collective", "llm")),
    params:
        args=lambda wc: workload(wc).generate_args(),
        prefix=lambda wc: workload(wc).prefix,
    conda:
        "../envs/chakra-pipe.yaml"
    log:
        f"{LOGS}/generate/{{workload}}.log",
    shell:
        "mkdir -p {output:q} && chakra-pipe generate {params.args:q} --out {params.prefix:q} > {log:q} 2>&1"
