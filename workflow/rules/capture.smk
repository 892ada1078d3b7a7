# Post-execution path: capture an N-rank PyTorch run, link host and Kineto traces, convert to Chakra.
# Only in the DAG when capture is enabled (capture: auto needs PyTorch installed).


rule capture:
    output:
        directory(f"{TRACES}/{{workload}}/capture"),
    wildcard_constraints:
        workload=name_pattern(CAMPAIGN.of_kind("capture")),
    params:
        model=lambda wc: workload(wc).spec["model"],
        ranks=lambda wc: workload(wc).npus,
        steps=lambda wc: workload(wc).spec.get("steps", 2),
        launcher=rank_launcher,
    threads: rank_tasks
    resources:
        tasks=rank_tasks,
        cpus_per_task=1,
        mpi="srun",
        mem_mb=rank_mem_mb,
        gpu=rank_gpus,
    conda:
        "../envs/chakra-pipe.yaml"
    log:
        f"{LOGS}/capture/{{workload}}.log",
    shell:
        "chakra-pipe capture --model {params.model:q} --ranks {params.ranks:q} --steps {params.steps:q}"
        " --launcher {params.launcher:q} --out {output:q} > {log:q} 2>&1"


rule link:
    input:
        f"{TRACES}/{{workload}}/capture",
    output:
        directory(f"{TRACES}/{{workload}}/linked"),
    wildcard_constraints:
        workload=name_pattern(CAMPAIGN.of_kind("capture")),
    params:
        last=lambda wc: workload(wc).npus - 1,
    conda:
        "../envs/chakra-pipe.yaml"
    log:
        f"{LOGS}/link/{{workload}}.log",
    shell:
        "mkdir -p {output} && for r in $(seq 0 {params.last}); do"
        " chakra-pipe link --host {input}/rank$r.host_et.json.gz --device {input}/rank$r.kineto.json.gz"
        " --out {output}/rank$r.linked.json.gz || exit 1; done > {log} 2>&1"


rule convert:
    input:
        f"{TRACES}/{{workload}}/linked",
    output:
        directory(f"{TRACES}/{{workload}}/et"),
    wildcard_constraints:
        workload=name_pattern(CAMPAIGN.of_kind("capture")),
    params:
        prefix=lambda wc: workload(wc).prefix,
    conda:
        "../envs/chakra-pipe.yaml"
    log:
        f"{LOGS}/convert/{{workload}}.log",
    shell:
        "mkdir -p {output} && chakra-pipe convert pytorch --ranks-dir {input} --out {params.prefix} > {log} 2>&1"
