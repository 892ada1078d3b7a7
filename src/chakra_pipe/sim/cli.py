"""``chakra-pipe simulate``: flag-compatible with ASTRA-sim's analytical binaries.

Stdout carries ASTRA-sim's per-rank line ``sys[i] finished, T cycles, exposed communication X cycles.``
so existing log parsers keep working. ``--logging-configuration``, ``--logging-folder``,
``--compute-scale`` and ``--comm-scale`` are accepted for compatibility; ASTRA-sim does not use the
two scales. The drop-in ``AstraSim_Analytical_Congestion_*`` scripts (``astrasim.py``) add the
statistics lines, the log folder and warnings for settings that are not modelled.
"""

from __future__ import annotations

import argparse

from ..aliases import comm_groups_option
from .backends import DEFAULT, NAMES

BOOL_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _bool(text: str) -> bool:
    v = BOOL_WORDS.get(text.lower())
    if v is None:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return v


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="simulate a rank set with the ASTRA-sim-compatible analytical model",
        description="Run the workload PREFIX.{rank}.et on an ASTRA-sim system/network "
        "configuration; same flags and per-rank output lines as ASTRA-sim.",
    )
    p.add_argument(
        "--workload-configuration",
        required=True,
        metavar="PREFIX",
        help="rank-set prefix (rank r reads PREFIX.r.et) or one .et file",
    )
    p.add_argument("--system-configuration", required=True, metavar="SYS.json")
    p.add_argument("--network-configuration", required=True, metavar="NET.yml")
    p.add_argument("--remote-memory-configuration", metavar="MEM.json")
    comm_groups_option(p)
    p.add_argument("--backend", choices=NAMES, default=DEFAULT)
    p.add_argument("--num-queues-per-dim", type=int, default=1)
    p.add_argument("--injection-scale", type=float, default=1.0)
    p.add_argument("--rendezvous-protocol", type=_bool, nargs="?", const=True, default=False)
    p.add_argument(
        "--compute-scale",
        type=float,
        default=1.0,
        help="accepted; no effect, as in ASTRA-sim (a value other than 1 prints a warning)",
    )
    p.add_argument(
        "--comm-scale",
        type=float,
        default=1.0,
        help="accepted; no effect, as in ASTRA-sim (a value other than 1 prints a warning)",
    )
    p.add_argument("--logging-configuration", default="empty", help="accepted; no log files are written")
    p.add_argument("--logging-folder", default="log", help="accepted; no log files are written")
    p.add_argument("--output-json", metavar="OUT.json", help="write the full result (SimResult.to_dict)")
    p.add_argument("--timeline", metavar="OUT.json", help="write a Chrome/Perfetto trace of every node")
    p.set_defaults(func=_simulate)


def _simulate(args) -> int:
    from ..lifecycle import one_shot

    # The simulator's modules, the trace set and the run's objects all live until the process ends:
    # collector passes over them free nothing (simulate() itself runs paused, for library callers too).
    with one_shot():
        return _run(args)


def _run(args) -> int:
    import sys

    from ..errors import StuckError
    from ..et.traceset import TraceSet
    from . import load_hardware, simulate
    from .result import finished_line

    for name in ("compute_scale", "comm_scale"):
        if getattr(args, name) != 1.0:
            print(
                f"chakra-pipe simulate: warning: --{name.replace('_', '-')}={getattr(args, name):g} has no effect "
                "(ASTRA-sim parses it and never uses it)",
                file=sys.stderr,
            )
    hw = load_hardware(
        args.system_configuration,
        args.network_configuration,
        args.remote_memory_configuration,
        backend=args.backend,
        num_queues_per_dim=args.num_queues_per_dim,
        injection_scale=args.injection_scale,
        rendezvous=args.rendezvous_protocol,
    )
    ts = TraceSet.load(args.workload_configuration, args.comm_groups)
    try:
        res = simulate(ts, hw)
    except StuckError as exc:  # ASTRA-sim prints the ranks that finished before it stops
        for rank, (t, x) in exc.finished.items():  # in finish order
            print(finished_line(rank, t, x))
        raise
    # Files first: printing is the part a closed stdout may cut short.
    if args.output_json or args.timeline:
        from ..atomic import write_json

        if args.output_json:
            write_json(args.output_json, res.to_dict())
        if args.timeline:
            write_json(args.timeline, res.timeline())
    for rank, (t, x) in enumerate(zip(res.finish_ns, res.exposed_comm_ns)):
        print(finished_line(rank, t, x))
    return 0
