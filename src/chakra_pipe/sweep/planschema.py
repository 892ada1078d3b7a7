"""The shape of ``plan.json``, checked on every read.

``plan.json`` is written by the workflow but it is a file on disk: a hand edit, a merge conflict or a
file from another version must stop ``sweep run`` / ``report aggregate`` with one line naming the
field, not a ``KeyError`` traceback deep inside, nor (worse) a shard that silently simulates the
wrong points. The checks mirror :meth:`Campaign.to_json` field for field.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..errors import ConfigError, InputError
from ..sim.backends import NAMES as BACKEND_NAMES
from .grid import check_hardware

# The config schema's `name` pattern: the campaign names reports/<campaign>/ and traces/<campaign>/, so a
# plan whose name holds a separator, a newline or `..` would point every reader elsewhere (and split
# the one-line error messages that quote the paths built from it).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")

KINDS = ("collective", "llm", "capture", "trace", "transform")


class _Checker:
    def __init__(self, file: str):
        self.file = file

    def fail(self, where: str, what: str) -> InputError:
        return InputError(
            f"damaged plan: {what} (delete it; the workflow writes it again)", file=self.file, where=where
        )

    def typed(self, value: Any, kind: type | tuple[type, ...], where: str, what: str) -> Any:
        kinds = kind if isinstance(kind, tuple) else (kind,)
        # bool is an int in Python; no plan field accepts one where a number is meant
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise self.fail(where, f"expected {what}, got {type(value).__name__}")
        return value

    def field(self, d: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, what: str) -> Any:
        if key not in d:
            raise self.fail(f"{where}.{key}" if where else key, "missing")
        return self.typed(d[key], kind, f"{where}.{key}" if where else key, what)

    def count(self, d: dict[str, Any], key: str, where: str, minimum: int) -> int:
        n = self.field(d, key, int, where, "an integer")
        if n < minimum:
            raise self.fail(f"{where}.{key}" if where else key, f"must be >= {minimum}, got {n}")
        return n


def check_plan(d: Any, file: str, deep: set[str] | None = None) -> None:
    """Raise :class:`InputError` naming the first field of ``d`` that :meth:`Campaign.to_json` would not write.

    ``deep``: the ids of the points to check field by field (all when None). Every point still gets
    the checks the rest of the plan leans on (an object, a unique text id, its NPU count), so the
    baseline and every workload's shards are checked whole. Why: a shard job reads only its own
    points; checking all of them made each of a campaign's points/shard_size jobs pay for every point
    (O(points^2) in all), the largest part of a shard job's plan read at 1,000 points.
    """
    c = _Checker(file)
    c.typed(d, dict, "", "a JSON object")
    for key in ("campaign", "config_sha256", "tracedir", "outdir"):
        c.field(d, key, str, "", "text")
    if not _NAME.fullmatch(d["campaign"]):
        raise c.fail("campaign", "not a name of letters, digits, '_', '.' and '-' as the config's campaign is")
    c.count(d, "shard_size", "", 1)
    c.count(d, "replay_iterations", "", 1)
    notes = c.field(d, "notes", list, "", "a list")
    for i, note in enumerate(notes):
        c.typed(note, str, f"notes[{i}]", "text")
    for i, skip in enumerate(c.field(d, "skipped", list, "", "a list")):
        c.typed(skip, dict, f"skipped[{i}]", "an object")
        for key in ("workload", "platform", "reason"):
            c.field(skip, key, str, f"skipped[{i}]", "text")
    if "searches" in d:
        c.field(d, "searches", dict, "", "an object")
    points = c.field(d, "points", list, "", "a list of points")
    ids: set[str] = set()
    for i, p in enumerate(points):
        where = f"points[{i}]"
        c.typed(p, dict, where, "a point object")
        pid = c.field(p, "id", str, where, "text")
        if pid in ids:
            raise c.fail(f"{where}.id", f"point id '{pid}' appears twice")
        ids.add(pid)
        if deep is None or pid in deep:
            _check_point(c, p, where)
        else:
            c.count(p, "npus", where, 1)
    baseline = c.field(d, "baseline", list, "", "a list of point ids")
    for i, b in enumerate(baseline):
        if c.typed(b, str, f"baseline[{i}]", "a point id") not in ids:
            raise c.fail(f"baseline[{i}]", f"unknown point id '{b}'")
    workloads = c.field(d, "workloads", dict, "", "an object of workloads")
    for name, w in workloads.items():
        _check_workload(c, name, w, ids, {p["id"]: p["npus"] for p in points})


def _check_point(c: _Checker, p: dict[str, Any], where: str) -> None:
    """Every field of one point but its id, in :meth:`Point.to_json`'s order."""
    c.field(p, "platform", str, where, "text")
    if c.field(p, "backend", str, where, "text") not in BACKEND_NAMES:
        raise c.fail(f"{where}.backend", f"unknown backend '{p['backend']}'")
    cost = c.field(p, "cost", (int, float, type(None)), where, "a number or null")
    if cost is not None and not (math.isfinite(cost) and cost >= 0):
        raise c.fail(f"{where}.cost", f"must be a finite number >= 0, got {cost}")
    c.count(p, "npus", where, 1)
    c.field(p, "settings", dict, where, "an object")
    c.field(p, "memory", (dict, type(None)), where, "an object or null")
    if "calibrated" in p:  # a measured platform: network and system come from its calibrate stage
        c.field(p, "calibrated", str, where, "a folder")
        c.field(p, "network", type(None), where, "null (read from the calibrated folder)")
        c.field(p, "system", type(None), where, "null (read from the calibrated folder)")
    else:
        c.field(p, "network", dict, where, "an object")
        c.field(p, "system", dict, where, "an object")
        try:
            check_hardware(p["network"], p["system"], p["memory"])
        except ConfigError as exc:
            raise c.fail(f"{where}.{exc.where}", exc.what) from None
    if "hbm_gib" in p:
        hbm = c.field(p, "hbm_gib", (int, float), where, "a number")
        if not (math.isfinite(hbm) and hbm > 0):
            raise c.fail(f"{where}.hbm_gib", f"must be a finite number > 0, got {hbm}")


def _check_workload(c: _Checker, name: str, w: Any, ids: set[str], npus_of: dict[str, int]) -> None:
    where = f"workloads.{name}"
    c.typed(w, dict, where, "a workload object")
    if c.field(w, "kind", str, where, "text") not in KINDS:
        raise c.fail(f"{where}.kind", f"unknown kind '{w['kind']}'")
    npus = c.count(w, "npus", where, 1)
    c.field(w, "spec", dict, where, "an object")
    c.field(w, "prefix", str, where, "text")
    c.field(w, "replay", bool, where, "true or false")
    c.field(w, "in_memory", bool, where, "true or false")
    base = c.field(w, "baseline", (str, type(None)), where, "a point id or null")
    if base is not None and base not in ids:
        raise c.fail(f"{where}.baseline", f"unknown point id '{base}'")
    shards = c.field(w, "shards", list, where, "a list of shards")
    for s, shard in enumerate(shards):
        swhere = f"{where}.shards[{s}]"
        if not c.typed(shard, list, swhere, "a list of point ids"):
            raise c.fail(swhere, "a shard with no points")
        for k, pid in enumerate(shard):
            c.typed(pid, str, f"{swhere}[{k}]", "a point id")
            if pid not in ids:
                raise c.fail(f"{swhere}[{k}]", f"unknown point id '{pid}'")
            if npus_of[pid] != npus:
                raise c.fail(f"{swhere}[{k}]", f"point '{pid}' has {npus_of[pid]} NPUs, the workload {npus}")
