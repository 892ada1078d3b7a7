"""ASTRA-sim hardware files as plain dicts, and the overrides a grid point applies to them.

A grid point is "base files + a few key overrides". Keeping the files as dicts until the shard job
builds the simulator's dataclasses means the plan is plain JSON (cheap to write, diff and hash) and a
misspelt key is caught when the plan is made, naming the config key, instead of in job 731 of 1,000.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..readfile import read_json, read_yaml
from ..sim.config import ASTRA_SIM_SYSTEM_KEYS

SECTIONS = ("network", "system", "memory")

# Every key ASTRA-sim reads (astra-sim-semantics.md §5.1-5.3); overrides must name one of these.
NETWORK_KEYS = frozenset({"topology", "npus_count", "bandwidth", "latency"})
SYSTEM_KEYS = ASTRA_SIM_SYSTEM_KEYS
MEMORY_KEYS = frozenset({"memory-type", "num-nodes", "num-npus-per-node", "remote-mem-latency", "remote-mem-bw"})
KNOWN_KEYS = {"network": NETWORK_KEYS, "system": SYSTEM_KEYS, "memory": MEMORY_KEYS}
# Keys a grid may set besides "<section>.<key>".
POINT_KEYS = frozenset({"backend", "cost"})


def load_file(path: str | Path, where: str) -> dict[str, Any]:
    """Read a YAML (network) or JSON (system, memory) hardware file into a dict."""
    p = Path(path)
    try:
        data = (read_json if p.suffix == ".json" else read_yaml)(p, error=ConfigError)
    except ConfigError as exc:  # name the config key that points at the file, then the file's problem
        what = (
            f"cannot read hardware file {p}: {exc.what.removeprefix('cannot read: ')}"
            if exc.what.startswith("cannot read")
            else f"{p}: {exc.what}"
        )
        raise ConfigError(what, file="config", where=where) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping of keys", file="config", where=where)
    return data


def check_key(key: str, where: str) -> None:
    """Reject an override key ASTRA-sim would not read (a typo would otherwise sweep nothing)."""
    if key in POINT_KEYS:
        return
    section, _, name = key.partition(".")
    if section not in KNOWN_KEYS or not name:
        raise ConfigError(
            f"unknown key '{key}': use network.<key>, system.<key>, memory.<key>, backend or cost",
            file="config",
            where=where,
        )
    if name not in KNOWN_KEYS[section]:
        raise ConfigError(
            f"unknown {section} key '{name}' (known: {', '.join(sorted(KNOWN_KEYS[section]))})",
            file="config",
            where=where,
        )


def apply(base: dict[str, Any], name: str, value: Any) -> Any:
    """The value ``base[name]`` takes: a scalar given for a per-dimension list fills every dimension.

    ``network.bandwidth: 400`` on a 2-D network means ``[400, 400]``; a list is taken as written.
    """
    current = base.get(name)
    if isinstance(current, list) and not isinstance(value, list):
        return [value] * len(current)
    return value


def npus(network: dict[str, Any], where: str) -> int:
    """Total NPUs of a network dict: the product of ``npus_count``."""
    counts = network.get("npus_count")
    if not isinstance(counts, list) or not counts or not all(isinstance(c, int) and c > 0 for c in counts):
        raise ConfigError(
            f"network npus_count must be a list of positive integers, got {counts!r}", file="config", where=where
        )
    total = 1
    for c in counts:
        total *= c
    return total


def label(value: Any) -> str:
    """Short text for a value in a point id: ``400``, ``0.5``, ``ring/direct``."""
    if isinstance(value, list):
        return "/".join(label(v) for v in value)
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
