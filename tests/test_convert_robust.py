"""Malformed host/Kineto traces end in a ChakraPipeError (one line, exit 2), never a traceback,
and whatever converts passes the structural self-check. Seeded mutations of the synthetic traces."""

from __future__ import annotations

import copy
import random

import pytest
from test_convert_pytorch import gloo_trace
from test_link_traces import host_obj, kineto_obj

from chakra_pipe.convert.check import rank_problems
from chakra_pipe.convert.pytorch import convert_trace
from chakra_pipe.errors import ChakraPipeError
from chakra_pipe.link.hostet import parse_host_trace
from chakra_pipe.link.kineto import parse_kineto
from chakra_pipe.link.linker import link_traces

JUNK = [None, "x", -5, 3.5, [], {}, [[1]], [1, 2, 3, 4, 5, 6], True, {"values": 1}, 10**30, float("nan"), float("inf")]
NODE_KEYS = [
    "id",
    "name",
    "ctrl_deps",
    "inputs",
    "outputs",
    "attrs",
    "ts",
    "inclusive_dur",
    "exclusive_dur",
    "sync_dep",
    "cat",
    "stream",
    "args",
]
EVENT_KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"]


def _convert_or_refuse(build) -> bool:
    """True if it converted (and the result is consistent), False if refused cleanly."""
    try:
        conv = build()
    except ChakraPipeError as exc:
        assert "\n" not in str(exc)
        return False
    assert rank_problems(conv.nodes) == []
    return True


@pytest.mark.parametrize("seed", range(4))
def test_mutated_host_traces_convert_or_fail_cleanly(seed: int):
    rng = random.Random(seed)
    outcomes = []
    for _ in range(150):
        obj = copy.deepcopy(gloo_trace())
        for _ in range(rng.randint(1, 3)):
            node = rng.choice(obj["nodes"])
            values = node.get("inputs", {}).get("values") if isinstance(node.get("inputs"), dict) else None
            if values and rng.random() < 0.5:
                values[rng.randrange(len(values))] = rng.choice(JUNK)
            else:
                node[rng.choice(NODE_KEYS)] = rng.choice(JUNK)
        outcomes.append(_convert_or_refuse(lambda: convert_trace(parse_host_trace(obj, "t.json"), 0)))  # noqa: B023
    # Mutations of unused fields must still convert (a converter that refuses everything fails here),
    # and some mutations must be refused (or the junk never reached the converter).
    assert any(outcomes) and not all(outcomes)


@pytest.mark.parametrize("seed", range(4))
def test_mutated_kineto_traces_link_or_fail_cleanly(seed: int):
    rng = random.Random(100 + seed)
    outcomes = []
    for _ in range(150):
        k = kineto_obj()
        for _ in range(rng.randint(1, 3)):
            ev = rng.choice(k["traceEvents"])
            if isinstance(ev.get("args"), dict) and ev["args"] and rng.random() < 0.5:
                ev["args"][rng.choice(sorted(ev["args"]))] = rng.choice(JUNK)
            else:
                ev[rng.choice(EVENT_KEYS)] = rng.choice(JUNK)

        def build():
            obj, _ = link_traces(parse_host_trace(host_obj(), "h.json"), parse_kineto(k, "k.json"))  # noqa: B023
            return convert_trace(parse_host_trace(obj, "linked.json"), 0)

        outcomes.append(_convert_or_refuse(build))
    assert any(outcomes) and not all(outcomes)
