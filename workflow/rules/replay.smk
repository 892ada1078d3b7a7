# Replay on the devices at hand (PyTorch); only in the DAG when replay is enabled.


rule replay:
    input:
        trace=trace_input,
        validated=f"{DATA}/validate/{{workload}}.txt",
    output:
        f"{DATA}/replay/{{workload}}.json",
    log:
        f"{LOGS}/replay/{{workload}}.log",
    conda:
        "../envs/chakra-pipe.yaml"
    threads: 2
    resources:
        mem_mb=4000,
    params:
        prefix=lambda wc: workload(wc).prefix,
        ranks=lambda wc: workload(wc).npus,
        iterations=CAMPAIGN.replay_iterations,
    shell:
        "chakra-pipe replay {params.prefix:q} --ranks {params.ranks:q} --iterations {params.iterations:q}"
        " --out {output:q} > {log:q} 2>&1"
