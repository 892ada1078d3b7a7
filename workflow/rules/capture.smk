# Post-execution path: capture an N-rank PyTorch run, link host and Kineto traces, convert to Chakra.
# Only in the DAG when capture is enabled (capture: auto needs PyTorch installed).


rule capture:
    output:
        directory(f"{TRACES}/{{workload}}/capture"),
    log:
        f"{LOGS}/capture/{{workload}}.log",
    wildcard_constraints:
        workload=name_pattern(CAMPAIGN.of_kind("capture")),
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
        model=lambda wc: workload(wc).spec["model"],
        ranks=lambda wc: workload(wc).npus,
        steps=lambda wc: workload(wc).spec["steps"],
        launcher=rank_launcher,
    shell:
        "chakra-pipe capture --model {params.model:q} --ranks {params.ranks:q} --steps {params.steps:q}"
        " --launcher {params.launcher:q} --out {output:q} > {log:q} 2>&1"


# One job per rank: ranks link independently, so a cluster runs them side by side.
rule link:
    input:
        f"{TRACES}/{{workload}}/capture",
    output:
        f"{TRACES}/{{workload}}/linked/rank{{rank}}.linked.json.gz",
    log:
        f"{LOGS}/link/{{workload}}.{{rank}}.log",
    wildcard_constraints:
        workload=name_pattern(CAMPAIGN.of_kind("capture")),
        rank=r"\d+",
    conda:
        "../envs/chakra-pipe.yaml"
    shell:
        "chakra-pipe link --host {input:q}/rank{wildcards.rank:q}.host_et.json.gz"
        " --device {input:q}/rank{wildcards.rank:q}.kineto.json.gz --out {output:q} > {log:q} 2>&1"


rule convert:
    input:
        lambda wc: [
            f"{TRACES}/{wc.workload}/linked/rank{r}.linked.json.gz"
            for r in range(workload(wc).npus)
        ],
    output:
        directory(f"{TRACES}/{{workload}}/et"),
    log:
        f"{LOGS}/convert/{{workload}}.log",
    wildcard_constraints:
        workload=name_pattern(CAMPAIGN.of_kind("capture")),
    conda:
        "../envs/chakra-pipe.yaml"
    params:
        linked=lambda wc, input: os.path.dirname(input[0]),
        prefix=lambda wc: workload(wc).prefix,
    shell:
        "(mkdir -p {output:q} && chakra-pipe convert pytorch --ranks-dir {params.linked:q} --out {params.prefix:q})"
        " > {log:q} 2>&1"
