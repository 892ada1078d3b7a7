"""What the per-file rules of a rank-set analysis cost, memoised on their inputs vs every rule on every file.

``chakra_pipe.rankset.analysis.file_results`` shares each rank's columns with the previous rank's
equal ones before its rules run, then reuses a rule's findings wherever its inputs are the very same
arrays (``FileChecker.memoised``); ``memo=False`` runs every rule on every file, without twins or
shared structures. Both run on one loaded set (attributes decoded beforehand, so neither pays the
decode), alternated, CPU seconds (``time.process_time``) of each round and the median ratio; the
findings of the two must be equal.

    python benchmarks/rankset_rules.py PREFIX [--rounds 3] [--full]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.rankset.analysis import file_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prefix")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--full", action="store_true", help="validate's rules (decode every record)")
    args = ap.parse_args()
    ts = TraceSet.load(args.prefix)
    for g in ts.ranks:
        g.attr_kind  # noqa: B018 -- decode every file's attributes outside the measurement
    files = [str(f) for f in ts.files]
    names = [str(k) for k in ts.comm_groups] if ts.comm_groups else []
    seconds: dict[bool, list[float]] = {True: [], False: []}
    found: dict[bool, list] = {}
    for _ in range(args.rounds):
        for memo in (False, True):
            t0 = time.process_time()
            results, _, _ = file_results(ts.ranks, files, names, 1, args.full, memo=memo)
            seconds[memo].append(time.process_time() - t0)
            found[memo] = [f for r in results for f in r.findings]
    assert found[True] == found[False], "memoised findings differ from every rule on every file"
    every, memo = statistics.median(seconds[False]), statistics.median(seconds[True])
    print(f"{args.prefix}: {len(ts.ranks)} files, {len(found[True])} findings (equal both ways)")
    print(f"  every rule on every file: {every:.3f} s CPU ({every / len(files) * 1e3:.2f} ms a file)")
    print(f"  memoised on inputs:       {memo:.3f} s CPU ({memo / len(files) * 1e3:.2f} ms a file)")
    print(f"  ratio: {every / memo:.1f}x   load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
