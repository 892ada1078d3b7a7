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
    threads: rank_tasks
    resources:
        tasks=rank_tasks,
        cpus_per_task=1,
        mpi="srun",
        mem_mb=rank_mem_mb,
        gpu=rank_gpus,
    params:
        prefix=lambda wc: workload(wc).prefix,
        ranks=lambda wc: workload(wc).npus,
        iterations=CAMPAIGN.replay_iterations,
        launcher=rank_launcher,
    shell:
        "chakra-pipe replay {params.prefix:q} --ranks {params.ranks:q} --iterations {params.iterations:q}"
        " --launcher {params.launcher:q} --out {output:q} > {log:q} 2>&1"
