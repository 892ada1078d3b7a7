# Leaderboards, plots, summary.json and the HTML page; then the standing leaderboard across campaigns.

from chakra_pipe.report.plots import PLOTS

# One caption (workflow/report/<plot>.rst) per plot the report package draws.
PLOT_FILES = {name: name.removesuffix(".png") + ".rst" for name in PLOTS}


rule report:
    input:
        plan=PLAN,
        results=f"{REPORT}/results.parquet",
        searches=CAMPAIGN.search_files(),
    output:
        board_md=f"{REPORT}/leaderboard.md",
        board_csv=report(
            f"{REPORT}/leaderboard.csv",
            caption="../report/leaderboard.rst",
            category="Leaderboard",
        ),
        summary=report(
            f"{REPORT}/summary.json",
            caption="../report/summary.rst",
            category="Results",
        ),
        html=report(
            f"{REPORT}/report.html",
            caption="../report/report_html.rst",
            category="Report",
        ),
        plots=[
            report(
                f"{REPORT}/plots/{name}",
                caption=f"../report/{caption}",
                category="Plots",
            )
            for name, caption in PLOT_FILES.items()
        ],
    log:
        f"{LOGS}/report.log",
    conda:
        "../envs/chakra-pipe.yaml"
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.summary),
    shell:
        "chakra-pipe report build --plan {input.plan:q} --results {input.results:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule standing_leaderboard:
    input:
        results=f"{REPORT}/results.parquet",
        board=f"{REPORT}/leaderboard.csv",
    output:
        f"{DATA}/standing.json",
    log:
        f"{LOGS}/standing.log",
    conda:
        "../envs/chakra-pipe.yaml"
    params:
        board=STANDING_BOARD,
    shell:
        "chakra-pipe report standing --results {input.results:q} --board {params.board:q} --stamp {output:q} > {log:q} 2>&1"
