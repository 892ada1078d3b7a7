# Every trace set is validated before any simulation: a bad trace stops here with its findings.


rule validate:
    input:
        trace_input,
    output:
        f"{DATA}/validate/{{workload}}.txt",
    log:
        f"{LOGS}/validate/{{workload}}.log",
    conda:
        "../envs/chakra-pipe.yaml"
    params:
        prefix=lambda wc: workload(wc).prefix,
    shell:
        "chakra-pipe validate {params.prefix:q} > {log:q} 2>&1 && cp {log:q} {output:q}.tmp && mv {output:q}.tmp {output:q}"
