# All shards, replays and capture timings -> one results table with provenance.


rule aggregate:
    input:
        plan=PLAN,
        shards=CAMPAIGN.shard_files(),
        replays=[CAMPAIGN.replay_path(w) for w in CAMPAIGN.replayed()],
        captures=[CAMPAIGN.capture_dir(w) for w in CAMPAIGN.of_kind("capture")],
    output:
        parquet=f"{REPORT}/results.parquet",
        csv=f"{REPORT}/results.csv",
    log:
        f"{LOGS}/aggregate.log",
    conda:
        "../envs/chakra-pipe.yaml"
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.csv),
    shell:
        "chakra-pipe report aggregate --plan {input.plan} --out-dir {params.out_dir} > {log} 2>&1"
