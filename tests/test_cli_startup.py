"""What ``chakra-pipe simulate`` imports before its first event (issue #15: start-up <= 0.2 s).

Why: every sweep point and Snakemake job is its own process, so an import the run does not need is
paid once per point. These tests pin *which* modules a small simulation loads (checked in a fresh
interpreter through ``sys.modules``), not how long they take: timings live in
``benchmarks/startup.py``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys

import pytest

from chakra_pipe import cli

SYSTEM = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "all-to-all-implementation": ["ring"],
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
}
NETWORK = "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]  # GB/s\nlatency: [ 500.0 ]\n"
# The modules of each collective algorithm other than ring (which every run may use), by the name a
# system file gives it; each key maps to the modules of the *other* algorithms, which its run must not load.
_ALGORITHMS = {
    "direct": ("chakra_pipe.sim.system.direct", "chakra_pipe.sim.system.direct_fast"),
    "halvingDoubling": ("chakra_pipe.sim.system.halving_doubling",),
    "doubleBinaryTree": ("chakra_pipe.sim.system.double_binary_tree", "chakra_pipe.sim.system.tree_fast"),
}
ALGORITHM_MODULES = {
    name: tuple(m for other, modules in _ALGORITHMS.items() if other != name for m in modules)
    for name in ("ring", *_ALGORITHMS)
}
# Heavy packages a simulation never needs, and the stage packages of other verbs.
NOT_FOR_SIMULATE = (
    "pandas",
    "matplotlib",
    "snakemake",
    "torch",
    "networkx",
    "yaml",  # the flat network file is read without PyYAML
    "logging",  # imported only by code that logs
    "socket",
    "hashlib",  # only for a digest or a temporary's name
    "gzip",  # only for a compressed input or output
    "chakra_pipe.atomic",  # a plain simulate writes no file
    "numpy.typing",  # annotations only
    "numpy.ma",  # imported by the plain np.unique (np.isin's sort path) to check for masked arrays
    "google.protobuf",  # the loader walks the wire format itself; message classes only for odd records
    "chakra_pipe.sim.network.aware",  # the default backend is the unaware one
    "chakra_pipe.sim.system.deadlock",  # only a stuck run explains itself
    *ALGORITHM_MODULES["ring"],  # the other collective algorithms: imported by a plan that uses them
    "chakra_pipe.report",
    "chakra_pipe.sweep",
    "chakra_pipe.search",
    "chakra_pipe.generate",
    "chakra_pipe.replay",
    "chakra_pipe.launch",
    "chakra_pipe.capture",
    "chakra_pipe.convert",
    "chakra_pipe.transform",
    "chakra_pipe.validate",
    "chakra_pipe.calibrate",
    "chakra_pipe.link",
)
# Runs the command in-process, then reports its exit code, what it imported, the OpenBLAS thread
# setting and whether the garbage collector is on on stderr (os and json are imported by every run anyway).
PROBE = """\
import gc, json, os, sys
from chakra_pipe.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as exc:  # --help
    rc = exc.code
blas = os.environ.get("OPENBLAS_NUM_THREADS")
report = {"rc": rc, "modules": sorted(sys.modules), "blas": blas, "gc": gc.isenabled()}
sys.stderr.write("\\nMODULES " + json.dumps(report) + "\\n")
"""


def _probe(argv: list[str]) -> tuple[int, str, set[str], str | None]:
    """Exit code, stdout, imported modules and ``OPENBLAS_NUM_THREADS`` of ``chakra-pipe ARGV``;
    asserts that the command left the garbage collector on (it pauses it only while importing)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=300, env=env)
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES "))
    report = json.loads(line.removeprefix("MODULES "))
    assert report["gc"] is True, f"chakra-pipe {argv[0]} left the garbage collector off"
    return report["rc"], done.stdout, set(report["modules"]), report["blas"]


def _loaded(modules: set[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


@pytest.fixture(scope="module")
def small_set(tmp_path_factory) -> list[str]:
    tmp = tmp_path_factory.mktemp("startup")
    prefix = str(tmp / "ar")
    argv = ["generate", "collective", "--type", "all_reduce", "--npus", "4", "--size", "64KiB", "--out", prefix]
    assert cli.main(argv) == 0
    (tmp / "sys.json").write_text(json.dumps(SYSTEM))
    (tmp / "net.yml").write_text(NETWORK)
    return [
        "simulate",
        f"--workload-configuration={prefix}",
        f"--system-configuration={tmp / 'sys.json'}",
        f"--network-configuration={tmp / 'net.yml'}",
    ]


def test_a_small_simulation_imports_only_what_it_runs(small_set):
    rc, out, modules, blas = _probe(small_set)
    assert rc == 0
    assert out.count(" finished, ") == 4, out
    loaded = [name for name in NOT_FOR_SIMULATE if _loaded(modules, name)]
    assert not loaded, f"simulate imported {loaded}"
    # The simulator does no linear algebra: OpenBLAS's per-core thread pool is start-up for nothing.
    assert "numpy" in modules and blas == "1"


@pytest.fixture(scope="module")
def symmetric_set(tmp_path_factory) -> list[str]:
    """A tp 4 x dp 8 rank set on a switch: a layout the symmetric engine proves and runs (as L3's and
    L96's are), so the run imports ``sim.symmetric`` and the network module it builds on; 32 ranks, so
    the ring pairs it checks are spread too wide for ``np.isin``'s table (its sort path loads numpy.ma)."""
    tmp = tmp_path_factory.mktemp("symmetric")
    prefix = str(tmp / "llm")
    argv = ["generate", "llm", "--model", "llama3-8b", "--layers", "1", "--dp", "8", "--tp", "4", "--out", prefix]
    assert cli.main(argv) == 0
    (tmp / "sys.json").write_text(json.dumps(SYSTEM))
    (tmp / "net.yml").write_text(NETWORK.replace("Ring", "Switch").replace("[ 4 ]", "[ 32 ]"))
    return [
        "simulate",
        f"--workload-configuration={prefix}",
        f"--system-configuration={tmp / 'sys.json'}",
        f"--network-configuration={tmp / 'net.yml'}",
    ]


def test_a_symmetric_run_imports_only_what_it_runs(symmetric_set):
    """The symmetric engine's start-up: its layout check needs no masked arrays, and its INFO lines,
    which a command without -v drops, import no logging (together ~12 ms of L3's and L96's start-up)."""
    rc, out, modules, _ = _probe(symmetric_set)
    assert rc == 0 and out.count(" finished, ") == 32, out
    assert "chakra_pipe.sim.symmetric" in modules  # the layout was proven and the symmetric engine ran
    its_own = "chakra_pipe.sim.network.aware"  # the engine's quotient networks subclass it
    loaded = [name for name in NOT_FOR_SIMULATE if name != its_own and _loaded(modules, name)]
    assert not loaded, f"a symmetric run imported {loaded}"


def test_a_symmetric_run_still_logs_with_verbose(symmetric_set):
    """The messages a plain run drops without importing logging are there with -v (and only then)."""
    for flags, shown in (([], False), (["-v"], True)):
        argv = [sys.executable, "-m", "chakra_pipe", *flags, *symmetric_set]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
        assert ("chakra-pipe: INFO: symmetric run: 1 of 32 ranks simulated" in done.stderr) == shown, done.stderr


@pytest.mark.parametrize("algorithm", sorted(_ALGORITHMS))
def test_each_algorithm_is_imported_by_the_run_that_uses_it(small_set, tmp_path, algorithm):
    """The lazy imports in ``Sys`` work in a fresh interpreter and load that algorithm alone."""
    system = dict(SYSTEM, **{f"{c}-implementation": [algorithm] for c in ("all-reduce", "all-gather")})
    (tmp_path / "sys.json").write_text(json.dumps(system))
    argv = [
        a if not a.startswith("--system-") else f"--system-configuration={tmp_path / 'sys.json'}" for a in small_set
    ]
    rc, out, modules, _ = _probe(argv)
    assert rc == 0 and out.count(" finished, ") == 4, out
    assert all(_loaded(modules, m) for m in _ALGORITHMS[algorithm]), algorithm
    loaded = [name for name in ALGORITHM_MODULES[algorithm] if _loaded(modules, name)]
    assert not loaded, f"a {algorithm} run imported {loaded}"


def test_attribute_kinds_need_no_protobuf():
    """``et.attrs``' oneof numbers are the descriptor's, and reading them imports no protobuf (so a
    trace's columns can be read without it)."""
    from chakra_pipe.et import attrs, schema

    oneof = schema.AttributeProto.DESCRIPTOR.oneofs_by_name["value"].fields
    assert attrs.KIND_NUMBER == {f.name: f.number for f in oneof}
    assert attrs.NUMBER_KIND[9] == "int64_val" and attrs.NUMBER_KIND[28] == "bool_list"
    code = "import sys, chakra_pipe.et.attrs as a; a.KIND_NUMBER['uint64_val']; print('google' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"


def test_the_plain_schema_tables_are_the_descriptors():
    """``et.schema``'s enum numbers and names (read by every stage without protobuf) match the message
    classes it builds on first use, and only that first use imports protobuf."""
    code = (
        "import sys; from chakra_pipe.et import schema as s; s.NODE_TYPE_NAMES, s.COMM_SEND_NODE; "
        "print('google' in sys.modules, s.built(), s.Node is s.CLASSES['Node'], 'google' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["False", "False", "True", "True"]
    from chakra_pipe.et import schema

    assert schema.NODE_TYPE_NAMES == {v.number: v.name for v in schema.NodeType.values}
    assert schema.COMM_TYPE_NAMES == {v.number: v.name for v in schema.CollectiveCommType.values}
    for table in (schema.NODE_TYPE_NAMES, schema.COMM_TYPE_NAMES):
        assert all(getattr(schema, name) == number for number, name in table.items())
    with pytest.raises(AttributeError):
        schema.NotAMessage  # noqa: B018


def test_simulate_help_loads_neither_numpy_nor_other_verbs():
    rc, out, modules, _ = _probe(["simulate", "--help"])
    assert rc == 0 and "--network-configuration" in out
    # pathlib: only commands that use paths pay for it; dataclasses (with inspect, ast, dis): only
    # the modules that define records, none of which registering the flags needs
    heavy = ("numpy", "pathlib", "dataclasses", "inspect")
    loaded = [name for name in (*heavy, *NOT_FOR_SIMULATE) if _loaded(modules, name)]
    assert not loaded, f"simulate --help imported {loaded}"


def test_the_verb_table_matches_what_the_modules_register():
    """``cli.VERBS`` decides which module a verb loads: it must name every verb its module adds."""
    for module in cli.COMMAND_MODULES:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(sub)
        assert {verb for verb, owner in cli.VERBS.items() if owner == module} == set(sub.choices), module


def test_global_flags_before_the_verb_and_unknown_verbs(capsys):
    assert cli._verb(["-vv", "-q", "simulate", "--help"]) == "simulate"
    assert cli._verb(["--verbose", "report", "build"]) == "report"
    assert cli._verb(["--help"]) is None
    assert cli._verb(["simulte"]) is None
    with pytest.raises(SystemExit) as exc:  # a typo still lists every verb, as argparse always did
        cli.main(["simulte"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'simulte'" in err and "simulate" in err and "report" in err


def test_the_collector_is_paused_only_while_imports_run():
    """``collector_paused`` turns the cyclic collector off for its body and restores the caller's
    setting on the way out, an exception included (a library caller's ``gc.disable()`` stays)."""
    import gc

    from chakra_pipe.lifecycle import collector_paused

    assert gc.isenabled()
    with pytest.raises(KeyError), collector_paused():
        assert not gc.isenabled()
        raise KeyError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_what_the_paused_body_allocated_skips_young_collections_but_stays_collectable():
    """After ``collector_paused(lasting=True)`` the body's objects sit in the oldest generation: the
    next young collection does not examine them, a full one still frees the garbage among them; a
    program's own frozen objects stay frozen. Without ``lasting`` they stay young, as before."""
    import gc
    import weakref

    from chakra_pipe.lifecycle import collector_paused

    class Node:
        pass

    gc.collect()
    passes = gc.get_stats()[0]["collections"]
    with collector_paused():
        young = [[i] for i in range(5000)]
    young.append([0])  # the first allocation after the body: a young pass over the 5,000
    assert gc.get_stats()[0]["collections"] > passes
    del young
    gc.collect()
    with collector_paused(lasting=True):
        kept = [[i] for i in range(5000)]  # tracked containers, alive after the body
        cycle = Node()
        cycle.self = cycle  # type: ignore[attr-defined]
        gone = weakref.ref(cycle)
        del cycle
        assert gc.get_count()[0] >= 5000
    assert gc.isenabled() and gc.get_count()[0] < 50  # nothing left young: no pass over the 5,000
    assert gone() is not None
    gc.collect()
    assert gone() is None and len(kept) == 5000
    gc.freeze()  # a pre-fork program's frozen objects
    try:
        frozen = gc.get_freeze_count()
        with collector_paused(lasting=True):
            kept.append([0])
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_simulate_leaves_the_objects_alive_at_exit_uncollected(small_set, tmp_path):
    """The simulate verb and the ASTRA-sim drop-in program freeze what is alive at exit (the
    shutdown's full collections skip it) as the last ``atexit`` hook but those registered later, and
    only in a process that ran them."""
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: sys.stderr.write(f'frozen {gc.get_freeze_count() > 0}\\n'))\n"
        "from chakra_pipe.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        "sys.stderr.write(f'before {gc.get_freeze_count()}\\n')\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *small_set], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-2:] == ["before 0", "frozen True"]
    done = subprocess.run([sys.executable, "-c", code, "simulate", "--help"], capture_output=True, text=True)
    assert done.stderr.splitlines()[-1:] == ["frozen False"]
    drop_in = code.replace("from chakra_pipe.cli import main", "from chakra_pipe.sim.astrasim import main_unaware")
    drop_in = drop_in.replace("rc = main(sys.argv[1:])", "main_unaware()")  # exits: no 'before' line
    done = subprocess.run(
        [sys.executable, "-c", drop_in, *small_set[1:]], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1:] == ["frozen True"]


def test_a_sweep_shard_imports_no_pandas_and_no_package_metadata(small_set, tmp_path):
    """A shard job is its own process per shard: it writes its collectives part without pandas and
    reads pandas' version (recorded in that part) without importlib.metadata (email, zipfile, csv)."""
    from conftest import validated

    from chakra_pipe.sweep.campaign import Campaign

    flags = dict(a.removeprefix("--").split("=", 1) for a in small_set[1:])
    workload = {"kind": "trace", "prefix": flags["workload-configuration"], "npus": 4, "platforms": ["ring"]}
    cfg = {
        "campaign": "t",
        "outdir": str(tmp_path / "reports"),
        "workloads": {"ar": workload},
        "hardware": {
            "platforms": {"ring": {"network": flags["network-configuration"], "system": flags["system-configuration"]}}
        },
    }
    camp = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)
    camp.write()
    out = tmp_path / "s0.csv"
    argv = ["sweep", "run", "--plan", camp.plan_path, "--workload", "ar", "--shard", "0", "--out", str(out)]
    rc, _, modules, blas = _probe(argv)
    assert rc == 0 and ",ok," in out.read_text()
    heavy = ("pandas", "importlib.metadata", "email", "matplotlib", "snakemake", "torch")
    loaded = [m for m in heavy if _loaded(modules, m)]
    assert not loaded, f"a sweep shard imported {loaded}"
    assert blas == "1"


def test_pandas_version_is_the_one_package_metadata_reads(tmp_path, monkeypatch):
    """The shard's own read of pandas' version agrees with ``importlib.metadata.version``: for the
    installed pandas, and for a folder earlier on ``sys.path`` holding another pandas dist-info (the
    first one found wins in both) or egg-info."""
    from importlib.metadata import version

    from chakra_pipe.results.collectives import _pandas_version

    read = _pandas_version.__wrapped__  # uncached: each case below changes sys.path
    assert read() == version("pandas")
    for release, info, meta in (
        ("9.8.7", "pandas-9.8.7.dist-info", "METADATA"),
        ("1.2.3", "Pandas-1.2.3.egg-info", "PKG-INFO"),
    ):
        folder = tmp_path / release
        (folder / info).mkdir(parents=True)
        (folder / info / meta).write_text(f"Metadata-Version: 2.1\nName: pandas\nVersion: {release}\n\nVersion: 0\n")
        monkeypatch.syspath_prepend(str(folder))
        assert read() == version("pandas") == release


def test_planning_a_trace_workload_imports_no_loader(small_set, tmp_path):
    """Every Snakemake start plans the campaign; checking a trace workload's rank files lists the
    folder without the loader (numpy, the decoder: ~0.2 s a start), and a count that disagrees with
    the declared NPUs is still refused, naming the key."""
    import json

    from conftest import validated

    flags = dict(a.removeprefix("--").split("=", 1) for a in small_set[1:])
    prefix = flags["workload-configuration"]
    platforms = {"ring": {"network": flags["network-configuration"], "system": flags["system-configuration"]}}
    configs = [
        validated(
            {
                "campaign": "t",
                "outdir": str(tmp_path / "reports"),
                "workloads": {"ar": {"kind": "trace", "prefix": prefix, "npus": npus, "platforms": ["ring"]}},
                "hardware": {"platforms": platforms},
            }
        )
        for npus in (4, 5)
    ]
    code = (
        "import json, sys\n"
        "from chakra_pipe.errors import ConfigError\n"
        "from chakra_pipe.sweep.campaign import Campaign\n"
        "good, bad = json.loads(sys.argv[1])\n"
        "Campaign.from_config(good, root=sys.argv[2], torch_available=False)\n"
        "try:\n"
        "    Campaign.from_config(bad, root=sys.argv[2], torch_available=False)\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
        "print('numpy' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(configs), str(tmp_path)], capture_output=True, text=True, check=True
    )
    refusal, numpy_loaded = done.stdout.strip().splitlines()
    assert "found 4 rank files (ranks 0..3), but the workload declares 5 NPUs" in refusal
    assert "workloads.ar.npus" in refusal
    assert numpy_loaded == "False"


def test_heap_policy_without_ctypes_or_glibc_does_nothing():
    """A Python built without ctypes (or a C library without malloc_trim) loads traces as before:
    the heap release after a large phase, and keeping freed memory during one, become no-ops
    instead of a traceback."""
    code = (
        "import sys; sys.modules['ctypes'] = None\n"
        "from chakra_pipe import heap\n"
        "heap.keep_freed_heap(1 << 23); heap.release_free_heap(); heap.release_free_heap(); print(heap._LIBC)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[None]"
