"""Campaign workloads derived by ``chakra-pipe transform``: a workload's ``transforms`` list, expanded.

Each op is a one-key mapping (``{dp: {to: 16}}``); a parameter given as a list of its values is an
axis (``{dp: {to: [16, 32]}}``; for the list-valued ``straggler.ranks`` and ``comm.type`` an axis is a
list of lists). Every combination of the axes becomes its own workload, named
``<workload>.<op>.<param>-<value>…`` (``<workload>.transformed`` without axes), simulated on every grid
point with its rank count, and reported with the op chain in the results' ``transform`` column.
"""

from __future__ import annotations

import shlex
from typing import Any

from ..errors import ConfigError
from .axes import combinations, label

LIST_PARAMS = {("straggler", "ranks"), ("comm", "type")}
# CLI flag of each config parameter, in the order the CLI lists them.
FLAGS = {
    "dp": (("to", "--to"), ("group", "--group")),
    "compute": (("scale", "--scale"), ("match", "--match"), ("type", "--type"), ("per_rank", "--per-rank")),
    "straggler": (("ranks", "--ranks"), ("delay", "--delay"), ("slowdown", "--slowdown"), ("at", "--at")),
    "comm": (("scale", "--scale"), ("drop", "--drop"), ("type", "--type")),
}


def _is_axis(op: str, param: str, value: Any) -> bool:
    if (op, param) in LIST_PARAMS:
        return isinstance(value, list) and bool(value) and all(isinstance(v, list) for v in value)
    return isinstance(value, list)


def _ops(name: str, spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    ops = []
    for i, item in enumerate(spec.get("transforms") or []):
        where = f"workloads.{name}.transforms[{i}]"
        if not (isinstance(item, dict) and len(item) == 1):
            raise ConfigError("each transform is a mapping with one op name", file="config", where=where)
        ((op, params),) = item.items()
        if op not in FLAGS or not isinstance(params, dict):
            raise ConfigError(f"unknown op {op!r} (choose from {', '.join(FLAGS)})", file="config", where=where)
        ops.append((op, params))
    return ops


def cli_args(op: str, params: dict[str, Any]) -> list[str]:
    """One op's ``chakra-pipe transform`` arguments."""
    args = [op]
    for key, flag in FLAGS[op]:
        value = params.get(key)
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, list):
            args += [flag, *map(str, value)]
        else:
            args += [flag, str(value)]
    return args


def dp_width(kind: str, spec: dict[str, Any], npus: int) -> int:
    """The data-parallel width ``dp --to`` will find (for planning the new rank count)."""
    if kind == "llm":
        return int(spec.get("dp", 1))
    return int(spec.get("dp", npus)) if kind == "trace" else npus


def variants(name: str, kind: str, spec: dict[str, Any], npus: int) -> list[dict[str, Any]]:
    """``[{name, npus, args, transform}]``, one per axis combination (none without ``transforms``)."""
    ops = _ops(name, spec)
    if not ops:
        return []
    axes = [
        (f"{op}.{param}", value) for op, params in ops for param, value in params.items() if _is_axis(op, param, value)
    ]
    names = [a for a, _ in axes]
    if len(set(names)) != len(names):
        raise ConfigError(
            f"axis {next(a for a in names if names.count(a) > 1)} appears in two ops; give each "
            "repeated op fixed values",
            file="config",
            where=f"workloads.{name}.transforms",
        )
    out = []
    for choice in combinations(axes):
        chosen = dict(choice)
        args: list[str] = []
        width, world = dp_width(kind, spec, npus), npus
        for op, params in ops:
            resolved = {p: chosen.get(f"{op}.{p}", v) for p, v in params.items()}
            if op == "dp":
                to = int(resolved["to"])
                if to < width or to % width:
                    raise ConfigError(
                        f"dp.to {to} is not a multiple of the workload's DP width {width}",
                        file="config",
                        where=f"workloads.{name}.transforms",
                    )
                world, width = world // width * to, to
            args += cli_args(op, resolved)
        out.append(
            {
                "name": f"{name}.{label(choice) if choice else 'transformed'}",
                "npus": world,
                "args": args,
                "transform": " | ".join(_chain_text(args)),
            }
        )
    return out


def _chain_text(args: list[str]) -> list[str]:
    """``["dp --to 16", "compute --scale 0.5"]``: the op chain as a user would type it."""
    parts: list[list[str]] = []
    for a in args:
        if a in FLAGS:
            parts.append([a])
        else:
            parts[-1].append(a)
    return [shlex.join(p) for p in parts]
