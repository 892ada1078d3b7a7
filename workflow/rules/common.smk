# Campaign resolution shared by every rule: workloads, grid points, shards and paths come from
# chakra_pipe.sweep.Campaign, so the DAG and the jobs read one definition.
import json
import os

from chakra_pipe.sweep.campaign import SEARCH_FILES, Campaign, name_pattern

CAMPAIGN = Campaign.from_config(config)
# plan.json (grid points, shards, config digest) is written here, when its content changed, rather
# than by a job: a job's output would mask the per-shard change checks of every shard downstream.
# Only the main process plans: a cluster job re-reading the Snakefile on a node (say, one without
# torch, which drops capture workloads) must not rewrite the plan under the running workflow.
# A dry run writes nothing into reports/: when the plan there is missing or stale it plans into
# .snakemake/ instead, and --lint (the only mode that skips checking environment variables) plans nothing.
PLAN = CAMPAIGN.plan_path
if workflow.is_main_process and workflow.check_envvars:
    if not workflow.output_settings.dryrun:
        CAMPAIGN.sync()
    elif not CAMPAIGN.is_current():
        PLAN = f".snakemake/chakra-pipe/{CAMPAIGN.name}/plan.json"
        CAMPAIGN.sync(PLAN)
REPORT = CAMPAIGN.report_dir
DATA = f"{REPORT}/data"
TRACES = f"{CAMPAIGN.tracedir}/{CAMPAIGN.name}"
LOGS = f"{DATA}/logs"
# Shared by every campaign; updated in place under a lock, so it is no rule's output.
STANDING_BOARD = f"{CAMPAIGN.outdir}/leaderboard.csv"


wildcard_constraints:
    shard=r"\d{4}",


def workload(wildcards):
    return CAMPAIGN.workloads[wildcards.workload]


def rank_launcher(wildcards):
    """How capture and replay start their ranks: one SLURM job step with a task per rank (srun)
    under the SLURM executor, every rank on this machine otherwise. A function, not a constant:
    the executor is known only once the workflow runs, after this file was read."""
    plugin = workflow.executor_plugin
    return (
        "srun"
        if plugin is not None and plugin.name in ("slurm", "slurm-jobstep")
        else "local"
    )


# Cluster resources of an N-rank job: a task and a CPU per rank (resource `mpi`: the job's shell
# starts its own job step, through `--launcher srun`), memory following the rank count, and GPUs
# from the config's `cluster.gpus_per_rank` (GPU type: the profile's `gpu_model`).
def rank_tasks(wildcards):
    return workload(wildcards).npus


def rank_mem_mb(wildcards):
    return 1000 + 1000 * workload(wildcards).npus


def rank_gpus(wildcards):
    return workload(wildcards).npus * config.get("cluster", {}).get("gpus_per_rank", 0)


def trace_files(name):
    """The rank files of an existing trace set, the folder a rule writes them to, or none (a
    workload generated in memory by its shard jobs)."""
    w = CAMPAIGN.workloads[name]
    if w.kind == "trace":
        return [f"{w.prefix}.{r}.et" for r in range(w.npus)]
    return [] if w.in_memory else f"{TRACES}/{w.name}/et"


def trace_input(wildcards):
    return trace_files(wildcards.workload)


def validated_input(wildcards):
    """validate's report of a trace set with files; an in-memory set is checked by its shard job."""
    w = workload(wildcards)
    return [] if w.in_memory else f"{DATA}/validate/{w.name}.txt"


def trace_option(wildcards):
    """`sweep run --trace PREFIX` for a set with files; none for one the shard job generates."""
    w = workload(wildcards)
    return [] if w.in_memory else ["--trace", w.prefix]


def final_outputs():
    files = [
        f"{REPORT}/results.parquet",
        f"{REPORT}/results.csv",
        f"{REPORT}/leaderboard.md",
        f"{REPORT}/leaderboard.csv",
        f"{REPORT}/summary.json",
        f"{REPORT}/report.html",
        f"{DATA}/standing.json",
    ]
    # Shards are targets too: a deleted shard is then recomputed (alone) even though the report
    # built from it is still newer than everything else.
    return (
        files
        + [f"{REPORT}/plots/{name}" for name in PLOT_FILES]
        + CAMPAIGN.shard_files()
        + CAMPAIGN.search_files()
    )
