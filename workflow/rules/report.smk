# Leaderboards, plots, summary.json and the HTML page; then, in the same job, the standing leaderboard
# across campaigns. One job, not two: both read the same results table, and a second process paid its
# own start-up, pandas import and parquet read (~0.7 s CPU of a 1,000-point campaign) for a few ms of
# work. A standing board that cannot be updated (say, a hand-damaged one) fails this job, naming it.

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
        standing=f"{DATA}/standing.json",
    log:
        f"{LOGS}/report.log",
    conda:
        "../envs/chakra-pipe.yaml"
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.summary),
        board=STANDING_BOARD,
    shell:
        "chakra-pipe report build --plan {input.plan:q} --results {input.results:q} --out-dir {params.out_dir:q}"
        " --board {params.board:q} --stamp {output.standing:q} > {log:q} 2>&1"
