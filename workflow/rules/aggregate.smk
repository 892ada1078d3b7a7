# All shards, replays and capture timings -> one results table with provenance.


rule aggregate:
    input:
        plan=PLAN,
        shards=CAMPAIGN.shard_files(),
        replays=[CAMPAIGN.replay_path(w) for w in CAMPAIGN.replayed()],
        captures=[CAMPAIGN.capture_dir(w) for w in CAMPAIGN.of_kind("capture")],
    output:
        parquet=f"{REPORT}/results.parquet",
        csv=report(
            f"{REPORT}/results.csv",
            caption="../report/results.rst",
            category="Results",
        ),
        collectives=f"{REPORT}/collectives.parquet",
    log:
        f"{LOGS}/aggregate.log",
    conda:
        "../envs/chakra-pipe.yaml"
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.csv),
    shell:
        "chakra-pipe report aggregate --plan {input.plan:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"
