"""Expand hardware platforms into grid points: named axes as a cartesian product, plus explicit points.

A platform is a set of ASTRA-sim files (network YAML, system JSON, optional remote-memory JSON) with
a backend and an optional cost. ``axes`` maps an axis name to its values. When the name is a config
key (``network.bandwidth``, ``system.all-reduce-implementation``, ``backend``, ``cost``) each value sets
that key; otherwise each value is a mapping of several keys set together (a "zipped" axis, e.g. a link
generation that fixes bandwidth, latency and cost at once; an optional ``label`` names the value).
Point ids depend only on the config text, never on run order, so results and leaderboards stay
comparable between runs and campaigns.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from . import hardware


@dataclass
class Point:
    """One simulated machine: full hardware dicts after overrides, plus what identifies it."""

    id: str
    platform: str
    backend: str
    cost: float | None
    npus: int
    network: dict[str, Any]
    system: dict[str, Any]
    memory: dict[str, Any] | None
    settings: dict[str, str] = field(default_factory=dict)  # axis name -> value label
    hbm_gib: float | None = None  # per-GPU memory, for search's memory check (platform key hbm_gib)

    def to_json(self) -> dict[str, Any]:
        d = {
            "id": self.id,
            "platform": self.platform,
            "backend": self.backend,
            "cost": self.cost,
            "npus": self.npus,
            "settings": self.settings,
            "network": self.network,
            "system": self.system,
            "memory": self.memory,
        }
        # Only when set, so plans (and shard digests) of configs without it keep their bytes.
        return d if self.hbm_gib is None else {**d, "hbm_gib": self.hbm_gib}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Point:
        return cls(
            id=d["id"],
            platform=d["platform"],
            backend=d["backend"],
            cost=d["cost"],
            npus=d["npus"],
            network=d["network"],
            system=d["system"],
            memory=d["memory"],
            settings=d["settings"],
            hbm_gib=d.get("hbm_gib"),
        )


def _is_key(name: str) -> bool:
    return name in hardware.POINT_KEYS or "." in name


def _axis_choices(name: str, values: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
    """(label, {key: value}) for every value of one axis, keys checked."""
    if not isinstance(values, list) or not values:
        raise ConfigError("an axis needs a non-empty list of values", file="config", where=where)
    choices = []
    for i, value in enumerate(values):
        if _is_key(name):
            hardware.check_key(name, where)
            choices.append((hardware.label(value), {name: value}))
            continue
        if not isinstance(value, dict) or not value:
            raise ConfigError(
                f"axis '{name}' is not a config key, so each value must be a mapping of "
                f"keys to set (value {i} is {value!r})",
                file="config",
                where=f"{where}[{i}]",
            )
        sets = {k: v for k, v in value.items() if k != "label"}
        for key in sets:
            hardware.check_key(key, f"{where}[{i}]")
        choices.append((str(value.get("label", i)), sets))
    return choices


def _short(axis: str) -> str:
    """``network.bandwidth`` -> ``bandwidth``: ids stay readable; the section is implied by the key."""
    return axis.partition(".")[2] or axis


def _build(
    platform: str, base: dict[str, Any], point_id: str, sets: dict[str, Any], settings: dict[str, str], where: str
) -> Point:
    parts = {s: copy.deepcopy(base[s]) for s in hardware.SECTIONS}
    backend, cost = base["backend"], base["cost"]
    for key, value in sets.items():
        if key == "backend":
            backend = value
        elif key == "cost":
            cost = value
        else:
            section, _, name = key.partition(".")
            if parts[section] is None:
                raise ConfigError(
                    f"'{key}' overrides a memory file the platform does not declare", file="config", where=where
                )
            parts[section][name] = hardware.apply(parts[section], name, value)
    if backend not in hardware.BACKENDS:
        raise ConfigError(
            f"backend must be one of {', '.join(hardware.BACKENDS)}, got {backend!r}", file="config", where=where
        )
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost < 0):
        raise ConfigError(f"cost must be a non-negative number, got {cost!r}", file="config", where=where)
    point = Point(
        id=point_id,
        platform=platform,
        backend=backend,
        cost=None if cost is None else float(cost),
        npus=hardware.npus(parts["network"], where),
        network=parts["network"],
        system=parts["system"],
        memory=parts["memory"],
        settings=settings,
    )
    _check_values(point, where)
    return point


def check_hardware(network: Any, system: Any, memory: Any) -> None:
    """Parse a point's hardware dicts with the simulator's own config classes; a :class:`ConfigError`
    whose ``where`` is ``section.key``. The plan's points pass here when it is made and when it is read,
    so every reader of a point (shards, the tidy per-dimension columns) sees values the simulator takes."""
    from ..sim.config import MemoryConfig, NetworkConfig, SystemConfig

    for section, cls, data in (
        ("network", NetworkConfig, network),
        ("system", SystemConfig, system),
        ("memory", MemoryConfig, memory),
    ):
        if data is None:
            continue
        try:
            cls.from_dict(data, source=section)
        except ConfigError as exc:
            raise ConfigError(exc.what, where=f"{section}.{exc.where}" if exc.where else section) from None


def _check_values(point: Point, where: str) -> None:
    """A bad value (a negative bandwidth, an unknown algorithm, a network whose lists disagree) fails
    when the plan is made, naming the config key and the point, rather than as a row in job 731 of 1,000."""
    try:
        check_hardware(point.network, point.system, point.memory)
    except ConfigError as exc:
        raise ConfigError(f"{exc.where}: {exc.what}", file="config", where=f"{where}: point '{point.id}'") from None


def expand_platform(name: str, spec: dict[str, Any], root: Path) -> list[Point]:
    """All grid points of one platform, in a stable order (axes in declared order, last fastest)."""
    where = f"hardware.platforms.{name}"
    base: dict[str, Any] = {
        "network": hardware.load_file(root / spec["network"], f"{where}.network"),
        "system": hardware.load_file(root / spec["system"], f"{where}.system"),
        "memory": hardware.load_file(root / spec["memory"], f"{where}.memory") if spec.get("memory") else None,
        "backend": spec.get("backend", "congestion_unaware"),
        "cost": spec.get("cost"),
    }
    axes = spec.get("axes") or {}
    points: list[Point] = []
    if axes or not spec.get("points"):
        per_axis = [_axis_choices(axis, values, f"{where}.axes.{axis}") for axis, values in axes.items()]
        for combo in itertools.product(*per_axis):
            settings = {axis: lab for axis, (lab, _) in zip(axes, combo)}
            sets = {k: v for _, s in combo for k, v in s.items()}
            pid = (
                name
                if not settings
                else name + "[" + ",".join(f"{_short(a)}={lab}" for a, lab in settings.items()) + "]"
            )
            points.append(_build(name, base, pid, sets, settings, f"{where}.axes"))
    for i, explicit in enumerate(spec.get("points") or []):
        pwhere = f"{where}.points[{i}]"
        sets = dict(explicit.get("set") or {})
        for key in sets:
            hardware.check_key(key, pwhere)
        if "cost" in explicit:
            sets["cost"] = explicit["cost"]
        settings = {k: hardware.label(v) for k, v in sets.items()}
        points.append(_build(name, base, str(explicit["id"]), sets, settings, pwhere))
    for point in points:
        point.hbm_gib = spec.get("hbm_gib")
    return points


def expand(platforms: dict[str, dict[str, Any]], root: Path) -> list[Point]:
    """Every platform's points; ids must be unique across the whole grid."""
    points: list[Point] = []
    seen: dict[str, str] = {}
    for name, spec in platforms.items():
        for point in expand_platform(name, spec, root):
            if point.id in seen:
                raise ConfigError(
                    f"duplicate grid point id '{point.id}' (also from platform {seen[point.id]})",
                    file="config",
                    where=f"hardware.platforms.{name}",
                )
            seen[point.id] = name
            points.append(point)
    return points


def select_points(points: list[Point], platforms: list[str], gpus: int, hbm_gib: float | None) -> list[Point]:
    """The points of ``platforms`` with ``gpus`` NPUs that a layout search evaluates, each with its
    per-GPU memory (``hbm_gib`` overrides the platform's). Here, beside the grid, because both the
    campaign planner (refusing a bad ``search:`` entry at planning) and ``search`` itself select them."""
    chosen = []
    for name in platforms:
        mine = [p for p in points if p.platform == name]
        if not mine:
            raise ConfigError(
                f"no platform {name!r} (have: {', '.join(sorted({p.platform for p in points}))})", where="--platform"
            )
        fit = [p for p in mine if p.npus == gpus]
        if not fit:
            raise ConfigError(
                f"platform {name} has no grid point with {gpus} NPUs (has "
                f"{', '.join(map(str, sorted({p.npus for p in mine})))}); add a point or axis "
                "setting network.npus_count",
                where="--platform",
            )
        for p in fit:
            if hbm_gib is not None:
                p.hbm_gib = hbm_gib
            if p.hbm_gib is None:
                raise ConfigError(
                    f"platform {name} declares no hbm_gib (per-GPU memory); set it or pass --hbm-gib",
                    where="--platform",
                )
        chosen += fit
    return chosen
