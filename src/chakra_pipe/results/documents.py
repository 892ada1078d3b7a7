"""Readers of the result documents other stages write: a replay's ``RESULT.json``, a capture's
``capture.json`` and the simulator's result JSON.

Why one module: ``report`` (aggregation), ``compare`` and the tests read these documents; reading
them here, through the shared JSON reader (:func:`chakra_pipe.readfile.read_json`: duplicate keys,
``NaN``, bad UTF-8 and truncation refused naming the file and line), gives every consumer the same
idea of a damaged file, and lets ``report`` read a replay without importing ``replay``.
Every time read back is checked to be a duration an int64 of ns can hold, so a hand-edited or
truncated file stops with its name instead of becoming a negative or infinite step time.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..readfile import read_json


def _duration(value: float, path: Path, what: str) -> float:
    """A time read from another stage's JSON: finite, >= 0 and an int64 of ns (else the file is damaged)."""
    if not (math.isfinite(value) and 0 <= value < 2**63):
        raise InputError(f"{what} {value!r} is not a duration in ns (0..2^63): a damaged file", file=str(path))
    return value


def _object(path: Path, what: str) -> dict[str, Any]:
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError(f"not {what} (a JSON {type(doc).__name__}, not an object)", file=str(path))
    return doc


def _field(doc: dict[str, Any], path: Path, what: str, *keys: str) -> Any:
    """``doc[k0][k1]...``, or an error naming the missing key path."""
    value: Any = doc
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise InputError(f"not {what} (no {'.'.join(keys)})", file=str(path))
        value = value[key]
    return value


def _number(value: Any, path: Path, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{what} {str(value)[:40]!r} is not a number: a damaged file", file=str(path))
    return float(value)


def read_replay_document(path: str | Path) -> dict[str, Any]:
    """A replay's ``RESULT.json`` as a dict (its ``step_time_ns.median`` checked)."""
    path = Path(path)
    doc = _object(path, "a replay result")
    median = _field(doc, path, "a replay result", "step_time_ns", "median")
    _duration(_number(median, path, "step_time_ns.median"), path, "step_time_ns.median")
    return doc


def read_replay(path: str | Path) -> float:
    """Median replayed iteration time (ns) from a replay RESULT.json."""
    return float(read_replay_document(path)["step_time_ns"]["median"])


def replay_pass(path: str | Path) -> tuple[int, str]:
    """(median replayed iteration = one pass over the trace, in ns; "backend/device" it ran on)."""
    doc = read_replay_document(path)
    env = doc.get("environment")
    env = env if isinstance(env, dict) else {}
    runtime = "/".join(str(env[k]) for k in ("backend", "device") if env.get(k)) or "torch"
    return int(round(float(doc["step_time_ns"]["median"]))), runtime


def _capture(folder: Path) -> tuple[dict[str, Any], float, int]:
    path = folder / "capture.json"
    doc = _object(path, "a capture summary")
    step_ms = _number(
        _field(doc, path, "a capture summary", "median_step_time_ms_untraced"), path, "median_step_time_ms_untraced"
    )
    steps = _field(doc, path, "a capture summary", "steps")
    if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps < 2**31:
        raise InputError(f"not a capture summary (steps {steps!r} is not a positive count)", file=str(path))
    step_ns = step_ms * 1e6
    return doc, _duration(step_ns * steps, path, "median step time x steps") / steps, steps


def read_capture(folder: str | Path) -> tuple[float, int]:
    """(untraced median step time in ns, number of profiled steps in the trace) from capture.json."""
    _, step_ns, steps = _capture(Path(folder))
    return step_ns, steps


def capture_pass(folder: str | Path) -> tuple[int, str]:
    """(untraced median step time x profiled steps in the trace, in ns; capture backend).

    The converted trace holds every profiled step, so one pass over it — what the simulator and the
    replay time — corresponds to that many untraced steps.
    """
    doc, step_ns, steps = _capture(Path(folder))
    return int(round(step_ns * steps)), str(doc.get("backend") or "torch")


def read_sim(path: str | Path) -> float:
    """Simulated step time (ns): the last rank's finish time in a simulator result JSON."""
    path = Path(path)
    doc = _object(path, "a simulator result")
    value = _field(doc, path, "a simulator result", "max_finish_ns")
    return _duration(_number(value, path, "max_finish_ns"), path, "max_finish_ns")
