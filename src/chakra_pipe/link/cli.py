"""``chakra-pipe link``: host ET + Kineto trace -> one linked ET+ JSON."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..console import logger


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "link",
        help="merge a host execution trace with its Kineto trace",
        description="Match host ops to Kineto CPU events by rf_id (Kineto without 'Record function "
        "id': by External id, when >= 90% of names agree), attach GPU kernels/memcpys via "
        "correlation to their launching op, add inclusive/exclusive durations and "
        "start timestamps, and measure the communication wait (gloo: idle while a collective "
        "ran on a worker thread, time in its blocking calls; NCCL: time blocked in a device sync "
        "while an NCCL kernel ran alone, as an NCCL call only enqueues). Plain or gzip inputs; no "
        "ProfilerStep required.",
    )
    p.add_argument(
        "--host", "--chakra-host-trace", required=True, type=Path, help="host execution trace HOST.json[.gz]"
    )
    p.add_argument("--device", "--chakra-device-trace", required=True, type=Path, help="Kineto trace KINETO.json[.gz]")
    p.add_argument("--out", "--output-file", required=True, type=Path, help="linked output LINKED.json[.gz]")
    p.set_defaults(func=_link)


def _link(args) -> int:
    from .linker import link_files

    stats = link_files(args.host, args.device, args.out)
    logger(__name__).info("link: %s: %s", args.out, stats.line())
    print("; ".join([f"link: wrote {args.out}", *stats.result_lines()]))
    return 0
