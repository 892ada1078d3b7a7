"""Expand hardware platforms into grid points: named axes as a cartesian product, plus explicit points.

A platform is a set of ASTRA-sim files (network YAML, system JSON, optional remote-memory JSON) with
a backend and an optional cost. ``axes`` maps an axis name to its values. When the name is a config
key (``network.bandwidth``, ``system.all-reduce-implementation``, ``backend``, ``cost``) each value sets
that key; otherwise each value is a mapping of several keys set together (a "zipped" axis, e.g. a link
generation that fixes bandwidth, latency and cost at once; an optional ``label`` names the value).
Point ids depend only on the config text, never on run order, so results and leaderboards stay
comparable between runs and campaigns.

A *measured* platform (``calibrate:`` instead of ``network``/``system``) gets its files from the
campaign's calibrate stage, which runs after planning: its points carry the folder those files will be
in (``calibrated``) and no network or system until :meth:`Point.resolve` reads them in the job. Its
grid may vary only ``backend`` and ``cost``: key overrides would need files the plan cannot see.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputError
from ..sim.backends import DEFAULT as DEFAULT_BACKEND
from ..sim.backends import NAMES as BACKEND_NAMES
from . import hardware

CALIBRATED_FILES = ("network.yml", "system.json")


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
    calibrated: str | None = None  # measured platform: folder of calibrate's network.yml + system.json

    def calibration_files(self) -> list[str]:
        """The calibrate outputs this point is simulated on (none for a file-based platform)."""
        return [f"{self.calibrated}/{f}" for f in CALIBRATED_FILES] if self.calibrated else []

    def resolve(self) -> None:
        """Read a measured point's network and system from its calibrate folder; a missing or wrong
        file is an error naming it. A no-op for file-based points and once resolved."""
        if self.calibrated is None or self.network is not None:
            return
        network_file, system_file = self.calibration_files()
        for path in (network_file, system_file):
            if not Path(path).is_file():
                raise InputError(
                    f"measured platform {self.platform}: {path} is missing (the calibrate stage writes it)",
                    file=path,
                )
        network = hardware.load_file(network_file, f"point {self.id}: network")
        system = hardware.load_file(system_file, f"point {self.id}: system")
        try:
            check_hardware(network, system, None)
        except ConfigError as exc:
            raise InputError(exc.what, file=self.calibrated, where=exc.where) from None
        npus = hardware.npus(network, network_file)
        if npus != self.npus:
            raise InputError(f"calibrated for {npus} NPUs, the plan expects {self.npus}", file=network_file)
        self.network, self.system = network, system

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
        # Only when set, so plans (and shard digests) of configs without them keep their bytes.
        if self.hbm_gib is not None:
            d["hbm_gib"] = self.hbm_gib
        if self.calibrated is not None:
            d["calibrated"] = self.calibrated
        return d

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
            calibrated=d.get("calibrated"),
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


def _copied(value: Any) -> Any:
    """A copy of a config section's dicts and lists (the leaves are immutable scalars), so one point's
    overrides never reach another's. Why not ``copy.deepcopy``: it took 0.27 of the 0.45 s CPU that
    expanding a 1,000-point grid costs in the workflow's planning process (profile of ``from_config``)."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


def _build(
    platform: str, base: dict[str, Any], point_id: str, sets: dict[str, Any], settings: dict[str, str], where: str
) -> Point:
    parts = {s: _copied(base[s]) for s in hardware.SECTIONS}
    backend, cost = base["backend"], base["cost"]
    for key, value in sets.items():
        if key == "backend":
            backend = value
        elif key == "cost":
            cost = value
        elif base["calibrate"]:
            raise ConfigError(
                f"'{key}': a measured platform's network and system come from its calibrate stage, "
                "so its grid can vary only backend and cost",
                file="config",
                where=where,
            )
        else:
            section, _, name = key.partition(".")
            if parts[section] is None:
                raise ConfigError(
                    f"'{key}' overrides a memory file the platform does not declare", file="config", where=where
                )
            parts[section][name] = hardware.apply(parts[section], name, value)
    if backend not in BACKEND_NAMES:
        raise ConfigError(
            f"backend must be one of {', '.join(BACKEND_NAMES)}, got {backend!r}", file="config", where=where
        )
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost < 0):
        raise ConfigError(f"cost must be a non-negative number, got {cost!r}", file="config", where=where)
    point = Point(
        id=point_id,
        platform=platform,
        backend=backend,
        cost=None if cost is None else float(cost),
        npus=base["calibrate"]["ranks"] if base["calibrate"] else hardware.npus(parts["network"], where),
        network=parts["network"],
        system=parts["system"],
        memory=parts["memory"],
        settings=settings,
    )
    if not base["calibrate"]:
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
        key = (section, repr(data))  # repr tells 1 from 1.0 and True, as the parsers do
        if key in _PASSED:
            continue
        try:
            cls.from_dict(data, source=section)
        except ConfigError as exc:
            raise ConfigError(exc.what, where=f"{section}.{exc.where}" if exc.where else section) from None
        if len(_PASSED) >= _PASSED_LIMIT:
            _PASSED.clear()
        _PASSED.add(key)


# Hardware sections that parsed. A grid repeats a few network and system dicts across all its points
# (1,000 points of a 10x10x10 grid: 100 networks, 10 systems), and every job that reads plan.json checks
# every point: parsing each distinct section once took a 1,000-point plan's load from ~110 to ~30 ms.
# Only successes are kept, so a bad point still fails where it stands; the bound keeps a long-lived
# process (search over many plans) from growing without end.
_PASSED: set[tuple[str, str]] = set()
_PASSED_LIMIT = 4096


def _check_values(point: Point, where: str) -> None:
    """A bad value (a negative bandwidth, an unknown algorithm, a network whose lists disagree) fails
    when the plan is made, naming the config key and the point, rather than as a row in job 731 of 1,000."""
    try:
        check_hardware(point.network, point.system, point.memory)
    except ConfigError as exc:
        raise ConfigError(f"{exc.where}: {exc.what}", file="config", where=f"{where}: point '{point.id}'") from None


def expand_platform(name: str, spec: dict[str, Any], root: Path, calibrate_dir: str | None = None) -> list[Point]:
    """All grid points of one platform, in a stable order (axes in declared order, last fastest).

    A measured platform's points get ``calibrated = calibrate_dir/<name>`` (none outside a campaign)."""
    where = f"hardware.platforms.{name}"
    measured = spec.get("calibrate")
    base: dict[str, Any] = {
        "network": None if measured else hardware.load_file(root / spec["network"], f"{where}.network"),
        "system": None if measured else hardware.load_file(root / spec["system"], f"{where}.system"),
        "memory": hardware.load_file(root / spec["memory"], f"{where}.memory") if spec.get("memory") else None,
        "backend": spec.get("backend", DEFAULT_BACKEND),
        "cost": spec.get("cost"),
        "calibrate": measured,
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
        if measured and calibrate_dir is not None:
            point.calibrated = f"{calibrate_dir}/{name}"
    return points


def expand(platforms: dict[str, dict[str, Any]], root: Path, calibrate_dir: str | None = None) -> list[Point]:
    """Every platform's points; ids must be unique across the whole grid."""
    points: list[Point] = []
    seen: dict[str, str] = {}
    for name, spec in platforms.items():
        for point in expand_platform(name, spec, root, calibrate_dir):
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
            if p.network is None:
                raise ConfigError(
                    f"platform {name} is measured (calibrate:): its network exists only after the campaign's "
                    "calibrate stage, so a search cannot plan on it; search a platform with network/system files",
                    where="--platform",
                )
            if hbm_gib is not None:
                p.hbm_gib = hbm_gib
            if p.hbm_gib is None:
                raise ConfigError(
                    f"platform {name} declares no hbm_gib (per-GPU memory); set it or pass --hbm-gib",
                    where="--platform",
                )
        chosen += fit
    return chosen
