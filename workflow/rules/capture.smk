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
    threads: 2
    resources:
        mem_mb=4000,
    conda:
        "../envs/chakra-pipe.yaml"
    log:
        f"{LOGS}/capture/{{workload}}.log",
    shell:
        "chakra-pipe capture --model {params.model:q} --ranks {params.ranks:q} --steps {params.steps:q}"
        " --out {output:q} > {log:q} 2>&1"


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
        "mkdir -p {output:q} && for r in $(seq 0 {params.last:q}); do"
        " chakra-pipe link --host {input:q}/rank$r.host_et.json.gz --device {input:q}/rank$r.kineto.json.gz"
        " --out {output:q}/rank$r.linked.json.gz || exit 1; done > {log:q} 2>&1"


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
        "mkdir -p {output:q} && chakra-pipe convert pytorch --ranks-dir {input:q} --out {params.prefix:q} > {log:q} 2>&1"
