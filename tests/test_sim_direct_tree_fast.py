"""The direct and double-binary-tree fast paths (unaware network) give every rank the event path's times.

``simulate(..., fast=True)`` evaluates plain ``direct`` phases as order statistics over the receives and
``doubleBinaryTree`` phases as one pass up and one down a tree; ``fast=False`` runs them message by
message. Compared on every rank: finish times, exposed communication, collective records and the
message count, over all collective types, 1-D and 3-D networks of every topology kind, several group
sizes, chunk counts and staggered starts — and on a same-time tie the recurrence cannot order, where
the fast path must decline and the rerun must still be exact.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from sim_paths import assert_fast_equals_message_path

from chakra_pipe.et import schema
from chakra_pipe.et.attrs import set_attr
from chakra_pipe.et.framing import write_trace
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig

TYPES = {
    "AR": schema.ALL_REDUCE,
    "RS": schema.REDUCE_SCATTER,
    "AG": schema.ALL_GATHER,
    "A2A": schema.ALL_TO_ALL,
}
# the module, not the function the package re-exports under the same name
simulate_module = importlib.import_module("chakra_pipe.sim.simulate")
IMPL_KEYS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")


def _write(tmp: Path, ranks: int, ctypes: list[str], stagger_us: int, size: int = 1 << 20) -> TraceSet:
    """Per rank: a compute node (rank-dependent length) then the collectives in a dependency chain."""
    prefix = tmp / "w"
    for r in range(ranks):
        nodes = [schema.Node(id=1, name="c", type=schema.COMP_NODE, duration_micros=(r * 7) % 5 * stagger_us)]
        for k, ct in enumerate(ctypes):
            n = schema.Node(id=2 + k, name=f"{ct}{k}", type=schema.COMM_COLL_NODE)
            n.data_deps.append(1 + k)
            set_attr(n, "comm_type", TYPES[ct])
            set_attr(n, "comm_size", size)
            nodes.append(n)
        write_trace(f"{prefix}.{r}.et", schema.GlobalMetadata(version="0.0.4"), nodes)
    return TraceSet.load(prefix)


def _hw(
    algo: list[str], topo: list[str], sizes: list[int], splits: int, opt: str, latency=None, mem_bw=1600, bandwidth=None
) -> HardwareConfig:
    system = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": splits,
        "collective-optimization": opt,
        "local-mem-bw": mem_bw,
        **{f"{k}-implementation": algo for k in IMPL_KEYS},
    }
    net = {
        "topology": topo,
        "npus_count": sizes,
        "bandwidth": bandwidth or [50, 25, 12.5][: len(sizes)],
        "latency": latency or [500, 700, 1100][: len(sizes)],
    }
    return HardwareConfig(
        SystemConfig.from_dict(system, source="sys"),
        NetworkConfig.from_dict(net, source="net"),
        backend="congestion_unaware",
    )


@pytest.mark.parametrize("opt", ["baseline", "localBWAware"])
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("topo", ["Ring", "Switch", "FullyConnected"])
@pytest.mark.parametrize("ranks", [2, 5, 8, 16])
def test_direct_every_collective_type_1d(tmp_path: Path, ranks: int, topo: str, splits: int, opt: str) -> None:
    ts = _write(tmp_path, ranks, ["AR", "RS", "AG", "A2A", "AR"], stagger_us=3)
    assert_fast_equals_message_path(ts, _hw(["direct"], [topo], [ranks], splits, opt))


@pytest.mark.parametrize("topo", ["Ring", "Switch"])
def test_direct_all_reduce_over_several_row_blocks(tmp_path: Path, topo: str) -> None:
    """More members than the fast path's row blocks (64 rows of delays and gathers at a time): the
    delay matrix (one value on a switch, per member pair on a ring) and the blocked gathers still
    give every rank the message path's times."""
    ts = _write(tmp_path, 70, ["AR"], stagger_us=3)
    assert_fast_equals_message_path(ts, _hw(["direct"], [topo], [70], 2, "baseline"))


@pytest.mark.parametrize("algo", ["direct", "doubleBinaryTree", "oneDirect"])
@pytest.mark.parametrize("sizes", [[2, 4, 2], [4, 2, 4]])
def test_all_reduce_3d(tmp_path: Path, algo: str, sizes: list[int]) -> None:
    ranks = sizes[0] * sizes[1] * sizes[2]
    ts = _write(tmp_path, ranks, ["AR", "AR"], stagger_us=2)
    impl = [algo] if algo.startswith("one") else [algo, "direct", algo]
    assert_fast_equals_message_path(ts, _hw(impl, ["Ring", "Switch", "FullyConnected"], sizes, 4, "baseline"))


@pytest.mark.parametrize("sizes", [[2, 4], [4, 4], [2, 2, 2]])
def test_direct_local_bw_aware_multi_dim(tmp_path: Path, sizes: list[int]) -> None:
    """Reduce-scatter up the dimensions, all-gather back down: direct RS / AG phases per dimension."""
    ranks = 1
    for s in sizes:
        ranks *= s
    ts = _write(tmp_path, ranks, ["AR", "RS", "AG"], stagger_us=0)
    assert_fast_equals_message_path(
        ts, _hw(["direct"] * len(sizes), ["Switch", "Ring", "FullyConnected"][: len(sizes)], sizes, 1, "localBWAware")
    )


@pytest.mark.parametrize("topo", ["Ring", "Switch", "FullyConnected"])
@pytest.mark.parametrize("splits", [1, 2, 5])
@pytest.mark.parametrize("ranks", [2, 4, 8, 32])
@pytest.mark.parametrize("stagger", [0, 1])
def test_double_binary_tree_1d(tmp_path: Path, ranks: int, topo: str, splits: int, stagger: int) -> None:
    ts = _write(tmp_path, ranks, ["AR", "AR", "AR"], stagger_us=stagger)
    assert_fast_equals_message_path(ts, _hw(["doubleBinaryTree"], [topo], [ranks], splits, "baseline"))


def test_windowed_direct_stays_exact(tmp_path: Path) -> None:
    """``direct<W>`` below P-1 runs message by message; mixed with fast phases the run is still exact."""
    ts = _write(tmp_path, 8, ["AR", "A2A"], stagger_us=1)
    assert_fast_equals_message_path(ts, _hw(["direct3"], ["Switch"], [8], 2, "baseline"))


def test_same_time_tie_declines_and_reruns_exactly(tmp_path: Path, monkeypatch) -> None:
    """A 4-NPU ring with latency = E + Pd: a reduce-scatter general lands exactly on the last receive.

    The two 1-hop messages arrive ``L`` ns before the 2-hop one, and their reduction packets come back
    ``E + Pd`` later — at the same ns. Whether the all-gather sends go then depends on the global
    event order, so the fast path must decline (a second, message-level pass) and still be exact.
    """
    calls: list[bool] = []
    real = simulate_module._simulate

    def spy(*args, **kw):
        calls.append(kw.get("phases_fast", True))
        return real(*args, **kw)

    monkeypatch.setattr(simulate_module, "_simulate", spy)
    pd = 3 * int((1 << 20) // 4 / (1600 * 1e9) * 1e9)  # Pd of a quarter of 1 MiB at 1,600 GB/s
    ts = _write(tmp_path, 4, ["AR"], stagger_us=0)
    hw = _hw(["direct"], ["Ring"], [4], 1, "baseline", latency=[10 + pd])
    assert_fast_equals_message_path(ts, hw)
    assert calls[:2] == [True, False]  # the fast run declined, the rerun used the message path
    calls.clear()
    assert_fast_equals_message_path(ts, _hw(["direct"], ["Ring"], [4], 1, "baseline", latency=[11 + pd]))
    assert calls[0] is True and len(calls) == 2  # no tie: fast run kept, plus the fast=False run


@pytest.mark.parametrize("topo", ["Ring", "Switch"])
@pytest.mark.parametrize("ranks", [3, 6, 8])
@pytest.mark.parametrize("stagger", [1, 3])
def test_direct_reduction_slower_than_network(tmp_path: Path, ranks: int, topo: str, stagger: int) -> None:
    """1 GB/s memory, 1-ns links: late reduce-scatter generals are overtaken by all-gather ones.

    This is the regime where the all-gather half needs its fixed point (the merged general order).
    """
    ts = _write(tmp_path, ranks, ["AR", "AR"], stagger_us=stagger, size=1 << 16)
    assert_fast_equals_message_path(
        ts, _hw(["direct"], [topo], [ranks], 2, "baseline", latency=[1], mem_bw=1, bandwidth=[1000])
    )
