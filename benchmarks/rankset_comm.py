"""What the communication part of the rank-set analysis costs on an existing set (issue #15).

After one warm-up analysis (which decodes every file's columns), this times, in CPU seconds, each
step that reads the comm specs, on fresh rank views: building the specs of every rank, the
collective matching, the collective-order rule, the point-to-point matching and the finish proof;
and prints the bytes the specs' columns take.

    python benchmarks/rankset_comm.py /work/bench/L96/g
"""

from __future__ import annotations

import argparse
import time

from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.rankset import analyze
from chakra_pipe.rankset.comm import comm_specs
from chakra_pipe.rankset.progress import stuck_nodes
from chakra_pipe.rankset.set_rules import RankView, check_collective_order, check_collectives, check_point_to_point


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prefix", help="rank-set prefix (PREFIX.<r>.et, PREFIX.comm_groups.json)")
    args = ap.parse_args()
    ts = TraceSet.load(args.prefix)
    a = analyze(ts)
    times: dict[str, float] = {}

    def timed(label, fn):
        t0 = time.process_time()
        out = fn()
        times[label] = time.process_time() - t0
        return out

    members = a.groups.members
    specs = timed("comm_specs", lambda: [comm_specs(v.graph, v.rank, v.result.comm_ok, members) for v in a.ranks])
    views = [RankView(v.rank, v.file, v.graph, v.result, s) for v, s in zip(a.ranks, specs)]
    timed("check_collectives", lambda: check_collectives(views, a.groups))
    timed("check_collective_order", lambda: check_collective_order(views))
    timed("check_point_to_point", lambda: check_point_to_point(views))
    timed("finish proof", lambda: stuck_nodes(views, a.slots, a.groups.members))
    columns = sum(x.nbytes for s in specs for x in (s.index, s.kind, s.comm_type, s.nbytes, s.group, s.channel, s.pos))
    print(f"{len(views)} ranks, {sum(len(s) for s in specs)} comm specs, columns {columns / 1e6:.1f} MB")
    for label, seconds in times.items():
        print(f"{label:24s} {seconds:7.3f} s CPU")


if __name__ == "__main__":
    main()
