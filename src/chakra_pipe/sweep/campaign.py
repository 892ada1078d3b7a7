"""A campaign: workloads x hardware grid points, split into shards, written down as ``plan.json``.

The Snakefile builds a :class:`Campaign` from the (schema-validated) config to know which jobs exist;
one job writes the same campaign to ``plan.json``, and every shard, aggregate and report job reads
that file instead of re-parsing the config, so a job sees exactly the grid the DAG was planned from.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..atomic import write_json, write_text
from ..errors import ConfigError, InputError
from ..generate.options import COLLECTIVE_FLAGS, LLM_FLAGS, MODEL_KEYS, cli_args
from ..readfile import read_json
from .grid import Point, expand, select_points
from .planschema import check_plan
from .transforms import variants
from .workload_axes import expand as expand_axes
from .workload_axes import has_axes

PLAN_VERSION = 1
# The layout keys of an `llm` workload that a campaign fills in when absent (layers: 2 keeps campaign
# steps small, unlike the CLI's preset depth). Not schema defaults: Snakemake's validator would write
# them into every workload, where they would clash with workload axes over the same keys.
LLM_LAYOUT_DEFAULTS = {"layers": 2, "dp": 1, "tp": 1, "pp": 1}
SEARCH_FILES = ("layouts.parquet", "layouts.csv", "layouts.md", "best.json", "pareto.png")


@dataclass
class Workload:
    """One trace set of the campaign and the grid points it is simulated on."""

    name: str
    kind: str  # collective | llm | capture | trace | transform (derived from another workload)
    npus: int
    spec: dict[str, Any]
    prefix: str  # rank files are PREFIX.<r>.et
    replay: bool
    shards: list[list[str]] = field(default_factory=list)  # point ids per shard
    baseline: str | None = None
    # Generated and simulated inside the shard jobs, no rank files (sweep/generated.py): a generated
    # workload that does not ask for its files (keep_traces) and that no stage reads files of.
    in_memory: bool = False

    def generate_args(self) -> list[str]:
        """Arguments of ``chakra-pipe generate`` for a generated workload (empty for others): a list, so
        the workflow quotes each one (``{params.args:q}``) and a value is never read as shell syntax."""
        s = self.spec
        if self.kind == "collective":
            args = ["collective", *cli_args(COLLECTIVE_FLAGS, s)]
        elif self.kind == "llm":
            args = [
                "llm",
                *cli_args(
                    LLM_FLAGS,
                    {
                        **{k: v for k, v in s.items() if k in LLM_FLAGS},
                        **{k: s.get(k, d) for k, d in LLM_LAYOUT_DEFAULTS.items()},
                    },
                ),
            ]
        else:
            return []
        return [str(a) for a in args]


@dataclass
class Campaign:
    name: str
    tracedir: str
    outdir: str
    shard_size: int
    workloads: dict[str, Workload]
    points: dict[str, Point]
    baseline: list[str]
    replay_iterations: int
    config_sha256: str
    notes: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)  # workload-axis points not simulated, and why
    searches: dict[str, dict[str, Any]] = field(default_factory=dict)  # config ``search:`` section
    # Measured platforms' ``calibrate:`` options (config only: jobs read the calibrated files, not these).
    calibrations: dict[str, dict[str, Any]] = field(default_factory=dict)

    # ---- paths (one place, so rules, jobs and reports agree) ----
    @property
    def report_dir(self) -> str:
        return f"{self.outdir}/{self.name}"

    @property
    def plan_path(self) -> str:
        return f"{self.report_dir}/data/plan.json"

    def shard_path(self, workload: str, shard: int) -> str:
        return f"{self.report_dir}/data/shards/{workload}/{shard:04d}.csv"

    def replay_path(self, workload: str) -> str:
        return f"{self.report_dir}/data/replay/{workload}.json"

    def capture_dir(self, workload: str) -> str:
        return f"{self.tracedir}/{self.name}/{workload}/capture"

    def shard_digest(self, workload: str, shard: int) -> str:
        """Digest of what one shard simulates (trace prefix and resolved points; the generator's arguments
        of a set it generates in memory, which has no files to change): the workflow reruns a shard when
        this changes, not whenever any part of the config does."""
        w = self.workloads[workload]
        blob: dict[str, Any] = {"prefix": w.prefix, "points": [self.points[p].to_json() for p in w.shards[shard]]}
        if w.in_memory:
            blob["generate"] = w.generate_args()
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]

    def calibrate_dir(self, platform: str) -> str:
        return f"{self.report_dir}/data/calibrate/{platform}"

    def calibrate_args(self, platform: str) -> list[str]:
        """``chakra-pipe calibrate`` arguments of a measured platform (without ``--out``): a list, so the
        workflow quotes each one."""
        spec = self.calibrations[platform]
        args = ["--ranks", str(spec["ranks"])]
        for key in ("backend", "min_size", "max_size", "fit_min_size", "iterations", "warmup", "load", "timeout"):
            if key in spec:
                args += [f"--{key.replace('_', '-')}", str(spec[key])]
        return args

    def shard_calibrations(self, workload: str, shard: int) -> list[str]:
        """The calibrate outputs a shard's measured points are simulated on: inputs of its job."""
        files = (f for p in self.workloads[workload].shards[shard] for f in self.points[p].calibration_files())
        return list(dict.fromkeys(files))

    def shard_files(self) -> list[str]:
        return [self.shard_path(w.name, i) for w in self.workloads.values() for i in range(len(w.shards))]

    def search_dir(self, name: str) -> str:
        return f"{self.report_dir}/search/{name}"

    def search_files(self) -> list[str]:
        return [f"{self.search_dir(n)}/{f}" for n in self.searches for f in SEARCH_FILES]

    def search_args(self, name: str) -> list[str]:
        """``chakra-pipe search`` arguments of one ``search:`` entry (without ``--plan`` and ``--out``): a
        list, so the workflow quotes each one (``{params.args:q}``)."""
        s = self.searches[name]
        args: list[Any] = ["--model", s["model"], "--gpus", s["gpus"]]
        for p in s["platforms"]:
            args += ["--platform", p]
        if s.get("micro_batch"):
            args += ["--micro-batch", *s["micro_batch"]]
        for key in ("global_batch", *MODEL_KEYS, "dtype", "peak_tflops", "mem_bw", "hbm_gib", "keep_top"):
            if s.get(key) is not None:
                args += [f"--{key.replace('_', '-')}", s[key]]
        if s.get("exhaustive"):
            args.append("--exhaustive")
        return [str(a) for a in args]

    def replayed(self) -> list[str]:
        return [w.name for w in self.workloads.values() if w.replay]

    def of_kind(self, *kinds: str) -> list[str]:
        return [w.name for w in self.workloads.values() if w.kind in kinds]

    def written(self) -> list[str]:
        """Generated workloads whose rank files the ``generate`` rule writes (the others stay in memory)."""
        return [w.name for w in self.workloads.values() if w.kind in ("collective", "llm") and not w.in_memory]

    # ---- building ----
    @classmethod
    def from_config(
        cls, config: dict[str, Any], root: str | Path = ".", torch_available: bool | None = None
    ) -> Campaign:
        """Resolve workloads, grid points, shards and baselines; errors name the config key.

        ``config`` must have been validated against ``workflow/schemas/config.schema.yaml`` with its
        defaults filled in (the Snakefile does both): the schema's defaults are the only defaults.
        """
        root = Path(root)
        if torch_available is None:
            torch_available = importlib.util.find_spec("torch") is not None
        name = config["campaign"]
        platforms = config["hardware"]["platforms"]
        points_list = expand(platforms, root, f"{config['outdir']}/{name}/data/calibrate")
        notes: list[str] = []
        measured = [n for n, p in platforms.items() if p.get("calibrate")]
        dropped: set[str] = set()
        if measured and not torch_available:  # calibrate measures through torch.distributed
            notes.append(f"measured platforms {', '.join(measured)} skipped: PyTorch is not installed")
            dropped = {p.id for p in points_list if p.platform in measured}
            points_list = [p for p in points_list if p.id not in dropped]
            platforms = {n: p for n, p in platforms.items() if n not in measured}
        points = {p.id: p for p in points_list}
        baseline = config["hardware"].get("baseline") or []
        baseline = [b for b in ([baseline] if isinstance(baseline, str) else baseline) if b not in dropped]
        for i, b in enumerate(baseline):
            if b not in points:
                raise ConfigError(
                    f"baseline point '{b}' is not a grid point", file="config", where=f"hardware.baseline[{i}]"
                )
        capture, replay = config["capture"], config["replay"]
        if capture == "auto" and not torch_available:
            notes.append("capture skipped: PyTorch is not installed (capture: auto)")
        if replay == "auto" and not torch_available:
            notes.append("replay skipped: PyTorch is not installed (replay: auto)")
        do_capture = capture == "always" or (capture == "auto" and torch_available)
        do_replay = replay == "always" or (replay == "auto" and torch_available)
        tracedir = config["tracedir"]
        shard_size = int(config["shard_size"])
        workloads: dict[str, Workload] = {}
        skipped: list[dict[str, str]] = []
        for wname, spec in _expanded(config["workloads"], points_list, skipped):
            kind = spec["kind"]
            if kind == "capture" and not do_capture:
                continue
            workloads[wname] = _workload(wname, spec, tracedir, name, do_replay)
            for v in variants(wname, kind, spec, workloads[wname].npus):
                if v["name"] in (config.get("workloads") or {}) or v["name"] in workloads:
                    raise ConfigError(
                        f"derived workload name {v['name']} is taken",
                        file="config",
                        where=f"workloads.{wname}.transforms",
                    )
                derived = {
                    "source": wname,
                    "args": v["args"],
                    "transform": v["transform"],
                    **({"platforms": spec["platforms"]} if "platforms" in spec else {}),
                }
                workloads[v["name"]] = Workload(
                    name=v["name"],
                    kind="transform",
                    npus=v["npus"],
                    spec=derived,
                    prefix=f"{tracedir}/{name}/{v['name']}/et/{v['name']}",
                    replay=False,
                )
        sources = {w.spec["source"] for w in workloads.values() if w.kind == "transform"}
        for w in workloads.values():
            w.in_memory = w.kind in ("collective", "llm") and not (
                w.spec.get("keep_traces") or w.replay or w.name in sources
            )
            _check_workload(w, root)  # once in_memory is known: it decides the generators' limits
            allowed = w.spec.get("platforms")
            ids = [p.id for p in points_list if p.npus == w.npus and (not allowed or p.platform in allowed)]
            if not ids:
                raise ConfigError(
                    f"no hardware grid point has {w.npus} NPUs" + (f" on platforms {allowed}" if allowed else ""),
                    file="config",
                    where=f"workloads.{w.name}",
                )
            w.shards = [ids[i : i + shard_size] for i in range(0, len(ids), shard_size)]
            w.baseline = next((b for b in baseline if b in ids), None)
        searches = dict(config.get("search") or {})
        for sname, sspec in searches.items():
            _check_search(sname, sspec, points_list)
        digest = hashlib.sha256(
            json.dumps(
                {"config": config, "points": [p.to_json() for p in points_list]}, sort_keys=True, separators=(",", ":")
            ).encode()
        ).hexdigest()
        return cls(
            name=name,
            tracedir=tracedir,
            outdir=config["outdir"],
            shard_size=shard_size,
            workloads=workloads,
            points=points,
            baseline=baseline,
            replay_iterations=int(config["replay_iterations"]),
            config_sha256=digest,
            notes=notes + [f"skipped {k['workload']} on {k['platform']}: {k['reason']}" for k in skipped],
            skipped=skipped,
            searches=searches,
            calibrations={n: dict(p["calibrate"]) for n, p in platforms.items() if p.get("calibrate")},
        )

    # ---- plan.json ----
    def to_json(self) -> dict[str, Any]:
        return {
            "plan_version": PLAN_VERSION,
            "campaign": self.name,
            "package_version": __version__,
            "config_sha256": self.config_sha256,
            "tracedir": self.tracedir,
            "outdir": self.outdir,
            "shard_size": self.shard_size,
            "baseline": self.baseline,
            "replay_iterations": self.replay_iterations,
            "notes": self.notes,
            "skipped": self.skipped,
            **({"searches": self.searches} if self.searches else {}),
            "workloads": {
                w.name: {
                    "kind": w.kind,
                    "npus": w.npus,
                    "spec": w.spec,
                    "prefix": w.prefix,
                    "replay": w.replay,
                    "shards": w.shards,
                    "baseline": w.baseline,
                    "in_memory": w.in_memory,
                }
                for w in self.workloads.values()
            },
            "points": [p.to_json() for p in self.points.values()],
        }

    def write(self, path: str | Path | None = None) -> None:
        write_json(path or self.plan_path, self.to_json(), indent=1)

    def _plan_text(self) -> str:
        return json.dumps(self.to_json(), indent=1, ensure_ascii=False, allow_nan=False) + "\n"

    def is_current(self, path: str | Path | None = None) -> bool:
        """Whether ``plan.json`` (or ``path``) already holds exactly this plan."""
        try:
            return Path(path or self.plan_path).read_text(encoding="utf-8") == self._plan_text()
        except (OSError, UnicodeDecodeError):
            return False

    def sync(self, path: str | Path | None = None) -> bool:
        """Write ``plan.json`` (or ``path``) only if its content changed; returns whether it wrote.

        The workflow calls this while it plans the DAG: an unchanged plan keeps its modification time,
        so nothing downstream reruns, and a changed one is in place before any job reads it.
        """
        if self.is_current(path):
            return False
        write_text(path or self.plan_path, self._plan_text())
        return True

    @classmethod
    def load(cls, path: str | Path, shard: tuple[str, int] | None = None) -> Campaign:
        """Read a ``plan.json`` written by :meth:`write`, checked field by field (:func:`check_plan`).

        ``shard`` (workload, index): a shard job's view, whose ``points`` hold that shard's points
        only, each checked whole (the rest of the plan only in its structure: ids, NPU counts,
        shards, baseline). Why: every one of a campaign's shard jobs read and checked every point,
        so the campaign's plan reading grew as points^2 / shard_size.
        """
        d = read_json(path)
        if not isinstance(d, dict) or d.get("plan_version") != PLAN_VERSION:
            raise InputError(f"not a chakra-pipe plan (plan_version {PLAN_VERSION} expected)", file=str(path))
        deep = None if shard is None else _shard_ids(d, *shard)
        check_plan(d, str(path), deep)
        workloads = {
            n: Workload(
                name=n,
                kind=w["kind"],
                npus=w["npus"],
                spec=w["spec"],
                prefix=w["prefix"],
                replay=w["replay"],
                shards=w["shards"],
                baseline=w["baseline"],
                in_memory=w["in_memory"],
            )
            for n, w in d["workloads"].items()
        }
        points = {p["id"]: Point.from_json(p) for p in d["points"] if deep is None or p["id"] in deep}
        for point in points.values():  # measured points whose calibrate stage has run (shards resolve theirs)
            if all(Path(f).is_file() for f in point.calibration_files()):
                point.resolve()
        return cls(
            name=d["campaign"],
            tracedir=d["tracedir"],
            outdir=d["outdir"],
            shard_size=d["shard_size"],
            workloads=workloads,
            points=points,
            baseline=d["baseline"],
            replay_iterations=d["replay_iterations"],
            config_sha256=d["config_sha256"],
            notes=d["notes"],
            skipped=d["skipped"],
            searches=d.get("searches", {}),
        )

    def workload(self, name: str) -> Workload:
        if name not in self.workloads:
            raise InputError(f"workload '{name}' is not in the plan (have: {', '.join(self.workloads)})")
        return self.workloads[name]


def _shard_ids(d: dict[str, Any], workload: str, shard: int) -> set[str] | None:
    """The point ids of one shard of an unchecked plan document; None (check every point) when the
    plan has no such shard or it is no list of ids: :func:`check_plan` or the shard job names that."""
    try:
        ids = d["workloads"][workload]["shards"][shard] if shard >= 0 else None
    except (KeyError, IndexError, TypeError):
        return None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        return None
    return set(ids)


def _expanded(
    specs: dict[str, Any], points: list[Point], skipped: list[dict[str, str]]
) -> list[tuple[str, dict[str, Any]]]:
    """Config workloads with workload axes replaced by their combinations; skips go to ``skipped``."""
    out: list[tuple[str, dict[str, Any]]] = []
    for name, spec in specs.items():
        if spec.get("kind") not in ("llm", "collective") or not has_axes(spec):
            out.append((name, spec))
            continue
        derived, skips = expand_axes(name, spec, points)
        skipped += [k.to_json() for k in skips]
        for dname, dspec in derived:
            if dname in specs:
                raise ConfigError(
                    f"derived workload name {dname} is taken", file="config", where=f"workloads.{name}.axes"
                )
            out.append((dname, dspec))
    return out


def _check_search(name: str, spec: dict[str, Any], points: list[Point]) -> None:
    """A ``search:`` entry whose platforms lack the GPU count or ``hbm_gib`` fails at planning, not in its job."""
    try:
        select_points(copy.deepcopy(points), list(spec["platforms"]), int(spec["gpus"]), spec.get("hbm_gib"))
    except ConfigError as exc:
        raise ConfigError(exc.what, file="config", where=f"search.{name}.platforms") from None


def _workload(name: str, spec: dict[str, Any], tracedir: str, campaign: str, do_replay: bool) -> Workload:
    kind = spec["kind"]
    where = f"workloads.{name}"
    if kind == "collective":
        n = spec["npus"]
    elif kind == "llm":
        n = math.prod(spec.get(k, LLM_LAYOUT_DEFAULTS[k]) for k in ("dp", "tp", "pp"))
    elif kind == "capture":
        n = spec["ranks"]
    elif kind == "trace":
        n = spec["npus"]
    else:
        raise ConfigError(f"unknown workload kind '{kind}'", file="config", where=f"{where}.kind")
    prefix = spec["prefix"] if kind == "trace" else f"{tracedir}/{campaign}/{name}/et/{name}"
    replay = do_replay and bool(spec.get("replay", kind == "capture"))
    return Workload(name=name, kind=kind, npus=int(n), spec=dict(spec), prefix=prefix, replay=replay)


def _check_workload(w: Workload, root: Path) -> None:
    """Refuse now what would fail only inside the workload's job, naming the config key.

    Generated workloads go through every check ``chakra-pipe generate`` makes before writing (an
    in-memory set against the memory limits, not the rank-file ones: it writes nothing); a captured
    model must exist; an existing trace set must hold exactly ``npus`` rank files.
    """
    where = f"workloads.{w.name}"
    if w.kind in ("collective", "llm"):
        from ..generate.cli import dry_run
        from ..generate.limits import OutputLimitError

        try:
            dry_run(w.generate_args(), w.in_memory)
        except InputError as exc:
            key = f"{where}.{exc.where.lstrip('-')}" if exc.where else where
            what = exc.what
            if isinstance(exc, OutputLimitError) and exc.lift:  # --allow-large is no campaign key
                what = (
                    f"{exc.refusal}: a campaign writes rank files only for keep_traces, replay or a transform's "
                    "source; without them the set is simulated in memory, where the limits are wider"
                )
            raise ConfigError(what, file="config", where=key) from None
    elif w.kind == "capture":
        from ..capture.plan import BUILTIN_MODELS

        model = str(w.spec["model"])
        script = Path(model) if Path(model).is_absolute() else root / model
        if model not in BUILTIN_MODELS and not (model.endswith(".py") and script.is_file()):
            raise ConfigError(
                f"unknown model {model!r}: choose {', '.join(BUILTIN_MODELS)} or an existing .py script",
                file="config",
                where=f"{where}.model",
            )
    elif w.kind == "trace":
        from ..et.rankfiles import find_rank_files

        prefix = Path(w.prefix) if Path(w.prefix).is_absolute() else root / w.prefix
        try:
            ranks = set(find_rank_files(prefix))
        except InputError:
            ranks = set()
        if ranks != set(range(w.npus)):
            found = f"{len(ranks)} rank files (ranks {min(ranks)}..{max(ranks)})" if ranks else "no rank files"
            raise ConfigError(
                f"{w.prefix}.<rank>.et: found {found}, but the workload declares {w.npus} NPUs",
                file="config",
                where=f"{where}.npus",
            )


def name_pattern(names: list[str]) -> str:
    """A wildcard regex matching exactly these workload names (never matching when empty)."""
    return "|".join(re.escape(n) for n in names) if names else "(?!x)x"
