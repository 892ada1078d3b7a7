"""``chakra-pipe generate collective|llm``: synthetic rank sets for the simulator and replay."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from typing import Any

from ..errors import InputError
from ..et.collectives import WITH_BROADCAST


def register(sub: argparse._SubParsersAction) -> None:
    gen = sub.add_parser(
        "generate",
        help="write synthetic Chakra rank sets (collectives, LLM training steps)",
        description="Write synthetic Chakra rank sets PREFIX.<rank>.et.",
    )
    verbs = gen.add_subparsers(dest="generate_command", metavar="KIND", required=True)

    p = verbs.add_parser("collective", help="one collective per rank, laid out like ASTRA-sim's microbenchmarks")
    p.add_argument(
        "--type",
        required=True,
        dest="collective",
        choices=[c.key for c in WITH_BROADCAST],
    )
    p.add_argument("--npus", required=True, type=int)
    p.add_argument(
        "--size",
        required=True,
        help="comm_size: bytes or 64KiB/1MiB/1MB (MB = 1,048,576 as ASTRA-sim uses); all_gather: per-rank input",
    )
    p.add_argument("--iterations", type=int, default=1, help="collectives per rank, chained (default 1)")
    p.add_argument("--out", required=True, help="output prefix: writes PREFIX.<rank>.et")
    p.add_argument("--allow-large", action="store_true", help="lift the output-size limits (README: Output limits)")
    p.set_defaults(func=_collective, prepare=_collective_spec)

    p = verbs.add_parser("llm", help="one Megatron-style training step (TP, 1F1B PP, DP, EP)")
    from .models import DTYPE_BYTES, PRESETS

    p.add_argument("--model", required=True, choices=sorted(PRESETS))
    for key, text in (
        ("layers", "transformer layers"),
        ("hidden", "hidden size"),
        ("heads", "attention heads"),
        ("ffn", "MLP inner size (per expert)"),
        ("vocab", "vocabulary size"),
        ("experts", "MoE experts (0 = dense)"),
        ("seq", "sequence length"),
    ):
        p.add_argument(f"--{key}", type=int, help=f"{text} (overrides the preset)")
    p.add_argument("--dp", type=int, default=1, help="data-parallel degree (default 1)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (default 1)")
    p.add_argument("--pp", type=int, default=1, help="pipeline stages (default 1)")
    p.add_argument("--ep", type=int, default=1, help="expert-parallel degree, divides dp (default 1)")
    p.add_argument("--microbatches", type=int, help="microbatches per step (default: pp)")
    p.add_argument("--global-batch", type=int, help="sequences per step (default: dp × microbatches)")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPE_BYTES))
    p.add_argument(
        "--zero",
        type=int,
        default=0,
        choices=[0, 1],
        help="1: gradient reduce-scatter + parameter all-gather instead of all-reduce",
    )
    p.add_argument("--peak-tflops", type=float, default=989.0, help="device peak, TFLOP/s (default 989, H100)")
    p.add_argument("--mem-bw", type=float, default=3350.0, help="device memory bandwidth, GB/s (default 3350)")
    p.add_argument(
        "--recompute",
        action="store_true",
        help="full activation recomputation: each layer's forward re-runs before its backward",
    )
    p.add_argument("--bucket-mb", type=float, default=25.0, help="gradient bucket cap, MiB (default 25)")
    p.add_argument(
        "--no-metadata-node",
        action="store_true",
        help="omit the per-rank process-group METADATA node (groups stay in PREFIX.comm_groups.json)",
    )
    p.add_argument("--out", required=True, help="output prefix: writes PREFIX.<rank>.et and PREFIX.comm_groups.json")
    p.add_argument("--allow-large", action="store_true", help="lift the output-size limits (README: Output limits)")
    p.set_defaults(func=_llm, prepare=_llm_spec)


def dry_run(argv: list[str], in_memory: bool = False) -> Any:
    """Every check ``chakra-pipe generate ARGV --out X`` makes before it writes a file, writing none;
    returns what the generator would be called with (a ``CollectiveSpec``, or ``(model, spec)``).
    ``in_memory``: the set is simulated in memory (a campaign's shard job), so the output limits are
    those of memory, not of rank files (:mod:`.limits`).

    The workflow calls this while planning, so a workload the generator would refuse (unknown model,
    a negative size, ``ep`` not dividing ``dp``) fails the plan naming its config key, not one job
    after the others have run. Raises :class:`InputError` whose ``where`` is the offending flag.
    """
    parser = argparse.ArgumentParser(prog="chakra-pipe")
    register(parser.add_subparsers(dest="command"))
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = parser.parse_args(["generate", *argv, "--out", "-"])
    except SystemExit:
        message = errors.getvalue().strip().splitlines()[-1].split(": error: ", 1)[-1]
        flag = re.match(r"argument (--[\w-]+)", message)
        raise InputError(message, where=flag.group(1) if flag else None) from None
    return args.prepare(args, in_memory)


def _collective_spec(args: argparse.Namespace, in_memory: bool = False):
    """The collective of the arguments, checked as ``generate_collective`` checks them; in memory it
    runs on the full engine, which holds every rank (:func:`.limits.check_full_engine`)."""
    from .collective import CollectiveSpec, check_collective
    from .limits import check_full_engine
    from .sizes import parse_size

    spec = CollectiveSpec(args.collective, args.npus, parse_size(args.size), args.iterations)
    check_collective(spec, allow_large=args.allow_large, in_memory=in_memory)
    if in_memory and not args.allow_large:
        check_full_engine(spec.npus, "a collective microbenchmark", "--npus")
    return spec


def _collective(args: argparse.Namespace) -> int:
    from .collective import generate_collective

    spec = _collective_spec(args)
    paths = generate_collective(spec, args.out, allow_large=args.allow_large)
    print(f"wrote {len(paths)} rank files {args.out}.<0..{len(paths) - 1}>.et ({spec.name})")
    return 0


def _llm_spec(args: argparse.Namespace, in_memory: bool = False):
    """(model, training spec) of the arguments, checked as ``generate_llm`` checks them (in memory:
    against the memory limits, :mod:`.limits`)."""
    from .limits import check_output
    from .llm import check_llm
    from .options import LLM_FLAGS, resolve_llm

    degrees = {"--dp": args.dp, "--tp": args.tp, "--pp": args.pp}
    if min(degrees.values()) >= 1:  # before Layout numbers its groups, which is O(world)
        check_output(
            args.dp * args.tp * args.pp,
            0,
            max(degrees, key=degrees.__getitem__),
            allow_large=args.allow_large,
            in_memory=in_memory,
        )
    opts = {k: getattr(args, k) for k in LLM_FLAGS}
    opts["no_metadata_node"] = args.no_metadata_node
    model, spec = resolve_llm({k: v for k, v in opts.items() if v is not None})
    check_llm(model, spec, allow_large=args.allow_large, in_memory=in_memory)
    return model, spec


def _llm(args: argparse.Namespace) -> int:
    from .llm import generate_llm

    model, spec = _llm_spec(args)
    result = generate_llm(model, spec, args.out, allow_large=args.allow_large)
    print(
        f"wrote {len(result.files)} rank files {args.out}.<rank>.et and {result.comm_groups_file}: "
        f"{result.nodes} nodes, {result.bytes} bytes, {result.flops:.6g} FLOPs"
    )
    return 0
