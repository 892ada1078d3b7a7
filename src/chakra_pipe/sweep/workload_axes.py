"""Workload axes: a generated workload's ``generate`` options swept as a cartesian product.

``axes: {tp: [2, 4, 8], pp: [1, 2, 4], microbatches: [4, 8]}`` on an ``llm`` workload (or ``size``,
``type``, ``iterations`` on a ``collective``) makes one workload per combination, named
``<workload>.<axis>-<value>…`` (stable: it depends only on the config text). The world size is tied to
the hardware: ``dp: auto`` (``npus: auto`` for a collective) takes ``dp = NPUs / (tp·pp)`` for each NPU
count the workload's platforms offer; otherwise ``dp·tp·pp`` must equal a platform's NPU count. A
combination that does not fit a platform — a product that differs from its NPU count, a ``tp`` that
does not divide the heads, a global batch that the microbatches do not divide — is *skipped* on that
platform with the reason, written to ``plan.json`` and the report, never failed: a sweep over layouts
naturally contains layouts that do not exist on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ChakraPipeError, ConfigError
from ..generate.options import COLLECTIVE_FLAGS, LLM_FLAGS, resolve_llm
from .axes import combinations, label
from .grid import Point

AUTO = "auto"


@dataclass
class Skip:
    """One (combination, platform) that is not simulated, and why."""

    workload: str
    platform: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"workload": self.workload, "platform": self.platform, "reason": self.reason}

    def note(self) -> str:
        return f"skipped {self.workload} on {self.platform}: {self.reason}"


def has_axes(spec: dict[str, Any]) -> bool:
    return bool(spec.get("axes")) or AUTO in (spec.get("dp"), spec.get("npus"))


def _world_key(kind: str) -> str:
    return "dp" if kind == "llm" else "npus"


def _check(kind: str, spec: dict[str, Any]) -> int:
    """The world size of one resolved spec; raises with the generator's own message when invalid."""
    if kind == "llm":
        _, training = resolve_llm(spec)
        return int(training.layout.world)
    from ..generate.sizes import parse_size

    parse_size(str(spec["size"]))
    return int(spec["npus"])


def expand(name: str, spec: dict[str, Any], points: list[Point]) -> tuple[list[tuple[str, dict[str, Any]]], list[Skip]]:
    """``([(derived name, resolved spec)], [skips])`` for one workload with axes or an ``auto`` size."""
    kind, where = spec["kind"], f"workloads.{name}"
    flags = LLM_FLAGS if kind == "llm" else COLLECTIVE_FLAGS
    axes_spec = spec.get("axes") or {}
    for axis, values in axes_spec.items():
        if axis not in flags:
            raise ConfigError(
                f"'{axis}' is not a generate {kind} option (choose from {', '.join(flags)})",
                file="config",
                where=f"{where}.axes",
            )
        if axis in spec:
            raise ConfigError(f"'{axis}' is both a fixed value and an axis", file="config", where=f"{where}.axes")
        if not isinstance(values, list) or not values:
            raise ConfigError("an axis needs a non-empty list of values", file="config", where=f"{where}.axes.{axis}")
    allowed = spec.get("platforms")
    platforms: dict[str, set[int]] = {}
    for p in points:
        if not allowed or p.platform in allowed:
            platforms.setdefault(p.platform, set()).add(p.npus)
    base = {k: v for k, v in spec.items() if k not in ("axes", "platforms")}
    wkey = _world_key(kind)
    auto = base.get(wkey) == AUTO
    sizes: list[int | None] = [*sorted({n for counts in platforms.values() for n in counts})] if auto else [None]
    derived: list[tuple[str, dict[str, Any]]] = []
    skips: list[Skip] = []
    for choice in combinations(list(axes_spec.items())):
        for n in sizes:
            resolved = {**base, **dict(choice)}
            chosen = list(choice)
            reason = None
            if n is not None:  # dp / npus: auto
                per = int(resolved.get("tp", 1)) * int(resolved.get("pp", 1)) if kind == "llm" else 1
                if n % per:
                    reason = f"tp·pp = {per} does not divide {n} NPUs"
                    chosen.append(("npus", n))
                else:
                    resolved[wkey] = n // per
                    chosen.append((wkey, n // per))
            dname = f"{name}.{label(chosen)}" if chosen else name
            if reason is None:
                try:
                    world = _check(kind, resolved)
                except ChakraPipeError as exc:
                    reason = exc.line()
            if reason is not None:
                owners = [pl for pl, counts in platforms.items() if n is None or n in counts]
                skips += [Skip(dname, pl, reason) for pl in owners]
                continue
            fits = [pl for pl, counts in platforms.items() if world in counts]
            for pl, counts in platforms.items():
                if pl not in fits and (n is None or n in counts):
                    skips.append(
                        Skip(
                            dname,
                            pl,
                            f"world size {_world_text(kind, resolved)} = {world} "
                            f"matches no point of {pl} (NPUs: "
                            f"{', '.join(map(str, sorted(counts)))})",
                        )
                    )
            if fits:
                derived.append((dname, {**resolved, "platforms": fits}))
    return derived, skips


def _world_text(kind: str, spec: dict[str, Any]) -> str:
    if kind != "llm":
        return "npus"
    return "·".join(f"{k} {spec.get(k, 1)}" for k in ("dp", "tp", "pp"))
