# Parallelism searches (config `search:`): one job per search, every layout generated and simulated in memory.


rule search:
    input:
        plan=ancient(PLAN),
    output:
        [f"{REPORT}/search/{{search}}/{name}" for name in SEARCH_FILES],
    log:
        f"{LOGS}/search/{{search}}.log",
    wildcard_constraints:
        search=name_pattern(list(CAMPAIGN.searches)),
    conda:
        "../envs/chakra-pipe.yaml"
    resources:
        mem_mb=4000,
        runtime=240,
    params:
        args=lambda wc: CAMPAIGN.search_args(wc.search),
        out=lambda wc: CAMPAIGN.search_dir(wc.search),
        # the search's own settings: a change to them reruns it, an unrelated config edit does not
        spec=lambda wc: json.dumps(CAMPAIGN.searches[wc.search], sort_keys=True),
    shell:
        "chakra-pipe search --plan {input.plan:q} {params.args:q} --out {params.out:q} > {log:q} 2>&1"
