"""``chakra-pipe transform IN_PREFIX OUT_PREFIX <op> [args] [<op> [args]] …``.

Ops are separated by their names, so each op's arguments are parsed by its own small parser and the
chain keeps the order given (``dp --to 8 compute --scale 0.5`` widens, then scales).
"""

from __future__ import annotations

import argparse

from ..errors import InputError

OP_NAMES = ("dp", "compute", "straggler", "comm")


class _OpParser(argparse.ArgumentParser):
    """An op's parser whose mistakes are input errors (exit 2, one line), not argparse exits."""

    def error(self, message: str):
        raise InputError(message, where=self.prog)


def _op_parsers() -> dict[str, _OpParser]:
    from .comm import TYPE_CHOICES

    dp = _OpParser(prog="dp", add_help=False)
    dp.add_argument("--to", type=int, required=True)
    dp.add_argument("--group")
    compute = _OpParser(prog="compute", add_help=False)
    compute.add_argument("--scale", default="1")
    compute.add_argument("--match")
    compute.add_argument("--type", choices=["COMP", "CPU"])
    compute.add_argument("--per-rank")
    straggler = _OpParser(prog="straggler", add_help=False)
    straggler.add_argument("--ranks", type=int, nargs="+", required=True)
    how = straggler.add_mutually_exclusive_group(required=True)
    how.add_argument("--delay", type=int, help="ns")
    how.add_argument("--slowdown")
    straggler.add_argument("--at")
    comm = _OpParser(prog="comm", add_help=False)
    what = comm.add_mutually_exclusive_group(required=True)
    what.add_argument("--scale")
    what.add_argument("--drop", action="store_true")
    comm.add_argument("--type", nargs="+", choices=TYPE_CHOICES, default=[])
    return {"dp": dp, "compute": compute, "straggler": straggler, "comm": comm}


def split_ops(tokens: list[str]) -> list[tuple[str, list[str]]]:
    """``[op, args…, op, args…]`` into ``[(op, args), …]``; the first token must be an op."""
    if not tokens or tokens[0] not in OP_NAMES:
        raise InputError(
            f"expected an op ({', '.join(OP_NAMES)}) after the prefixes, got {tokens[0] if tokens else 'nothing'!r}"
        )
    out: list[tuple[str, list[str]]] = []
    for tok in tokens:
        if tok in OP_NAMES:
            out.append((tok, []))
        else:
            out[-1][1].append(tok)
    return out


def build_steps(tokens: list[str]):
    """Parse the op chain into :class:`~.pipeline.Step` objects (all checks before any reading)."""
    from .comm import CommDropOp, CommScaleOp
    from .compute import ComputeOp, NodeFilter, compile_regex, per_rank_factors
    from .dp import DpOp
    from .numbers import parse_factor
    from .pipeline import Op, Step
    from .straggler import StragglerOp, delay_micros

    parsers = _op_parsers()
    steps = []
    op: Op
    for name, args in split_ops(tokens):
        a = parsers[name].parse_args(args)
        if name == "dp":
            if a.to < 1:
                raise InputError(f"--to {a.to} is not a positive width", where="dp")
            op = DpOp(a.to, a.group)
        elif name == "compute":
            op = ComputeOp(
                parse_factor(a.scale, "compute --scale", allow_zero=True),
                NodeFilter(compile_regex(a.match, "compute --match"), a.type),
                per_rank_factors(a.per_rank) if a.per_rank else {},
            )
        elif name == "straggler":
            op = StragglerOp(
                tuple(a.ranks),
                None if a.delay is None else delay_micros(a.delay),
                None if a.slowdown is None else parse_factor(a.slowdown, "straggler --slowdown"),
                compile_regex(a.at, "straggler --at"),
            )
        else:
            op = CommDropOp() if a.drop else CommScaleOp(parse_factor(a.scale, "comm --scale"), tuple(a.type))
        steps.append(Step(op, tuple(args)))
    return steps


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "transform",
        help="what-if edits of a rank set: re-target DP width, scale compute/comm, stragglers",
        description="Apply ops in order to the rank set IN_PREFIX and write OUT_PREFIX (+ "
        "OUT_PREFIX.transform_stats.json). Ops: dp --to M [--group PG] | compute --scale F [--match REGEX] "
        "[--type COMP|CPU] [--per-rank FILE] | straggler --ranks R... (--delay NS | --slowdown F) "
        "[--at NODE_REGEX] | comm (--scale F [--type T...] | --drop).",
    )
    p.add_argument("in_prefix")
    p.add_argument("out_prefix")
    p.add_argument("ops", nargs=argparse.REMAINDER, help="op chain, e.g. dp --to 8 compute --scale 0.5")
    p.set_defaults(func=_transform)


def _transform(args: argparse.Namespace) -> int:
    from .pipeline import run_transforms

    steps = build_steps(args.ops)
    result = run_transforms(args.in_prefix, args.out_prefix, steps)
    for s in result.stats:
        print(
            f"{s.op} {' '.join(s.params['args'])}: {s.nodes_touched} nodes touched; ranks "
            f"{s.before.ranks}->{s.after.ranks}, nodes {s.before.nodes}->{s.after.nodes}, comm bytes "
            f"{s.before.comm_bytes}->{s.after.comm_bytes}, compute µs {s.before.comp_micros}->{s.after.comp_micros}"
        )
    print(f"wrote {len(result.files)} rank files {args.out_prefix}.<rank>.et and {result.stats_file}")
    return 0
