"""What calibrate's harness adds to a small gloo collective: replay engine vs a bare loop, alternated.

calibrate times collectives through the replay engine; a training step issues them from PyTorch
directly. For tiny messages (DDP buckets and explicit calls of the built-in models are 256 B–6 KB)
the time is a per-call cost, so any cost the harness adds becomes the fitted latency. This script
alternates, on the same machine and minutes apart at most:

* **replay** — calibrate's own measurement (``chakra_pipe.calibrate.bench``) of a chain of
  ``--calls`` all-reduces of ``--size`` bytes on 2 gloo ranks (median over calls and iterations);
* **bare** — the same chain from two ``torch.multiprocessing`` processes, each call
  ``all_reduce(async_op=True)`` polled with the replay executor's own policy (yield, then nap),
  timed from the last rank's issue to the last rank's completion on the shared monotonic clock.

With ``--p2p`` it times calibrate's ping-pong instead (the rows that fix the fitted latency): rank
0's round trip (its send's start to its receive's end, one clock) of ``--calls`` ping-pongs of
``--size`` bytes per iteration, through the replay engine (``bench.ping_pong``) and bare, both ways
a PyTorch program waits: blocking ``send``/``recv`` (**bare send**) and ``isend``/``irecv`` then
``wait()`` (**bare wait**), receives posted before the send as the replay pre-posts them.

It prints the medians, their ratio and the load average per round: on a shared machine compare
only rounds of one run. Needs torch.

    python benchmarks/calibrate_harness.py [--rounds 3] [--size 4096] [--calls 8] [--p2p]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time

from chakra_pipe.calibrate import bench
from chakra_pipe.replay.executor import wait_work


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bare_rank(rank: int, port: int, size: int, calls: int, iterations: int, queue) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # as every replay rank runs
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    t = torch.zeros(size, dtype=torch.uint8)
    spans = []
    for _ in range(iterations + 1):  # the first pass warms gloo up, as calibrate's warm-up does
        dist.barrier()
        for _ in range(calls):
            start = time.monotonic_ns()
            wait_work(dist.all_reduce(t, async_op=True))
            spans.append((start, time.monotonic_ns()))
    queue.put((rank, spans[calls:]))
    dist.destroy_process_group()


def _bare_p2p_rank(rank: int, port: int, size: int, calls: int, iterations: int, queue, blocking: bool) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    t, back = torch.zeros(size, dtype=torch.uint8), torch.zeros(size, dtype=torch.uint8)
    peer = 1 - rank
    spans = []
    for _ in range(iterations + 1):
        dist.barrier()
        for _ in range(calls):
            start = time.monotonic_ns()
            if blocking and rank == 0:
                dist.send(t, peer)
                dist.recv(back, peer)
            elif blocking:
                dist.recv(back, peer)
                dist.send(t, peer)
            elif rank == 0:
                pong = dist.irecv(back, peer)  # posted first, as the replay pre-posts receives
                dist.isend(t, peer).wait()
                pong.wait()
            else:
                dist.irecv(back, peer).wait()
                dist.isend(t, peer).wait()
            spans.append((start, time.monotonic_ns()))
    queue.put((rank, spans[calls:]))
    dist.destroy_process_group()


def _spawn(target, args: tuple) -> dict[int, list[tuple[int, int]]]:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue, port = ctx.Queue(), _free_port()
    procs = [ctx.Process(target=target, args=(r, port, *args[:3], queue, *args[3:])) for r in range(2)]
    for p in procs:
        p.start()
    spans = dict(queue.get(timeout=300) for _ in procs)
    for p in procs:
        p.join()
    return spans


def bare_us(size: int, calls: int, iterations: int) -> float:
    spans = _spawn(_bare_rank, (size, calls, iterations))
    return statistics.median((max(a[1], b[1]) - max(a[0], b[0])) / 1e3 for a, b in zip(spans[0], spans[1]))


def bare_p2p_us(size: int, calls: int, iterations: int, blocking: bool) -> float:
    """Median round trip on rank 0 (its own clock alone)."""
    return statistics.median((b - a) / 1e3 for a, b in _spawn(_bare_p2p_rank, (size, calls, iterations, blocking))[0])


def replay_us(size: int, calls: int, iterations: int) -> float:
    cases, nodes, _ = bench._replay(2, (size,) * calls, "gloo", iterations, 1, 300.0, None, ("all_reduce",))
    return statistics.median(bench.call_ns(nodes, k, it) / 1e3 for k in range(len(cases)) for it in range(iterations))


def replay_p2p_us(size: int, calls: int, iterations: int) -> float:
    """calibrate's own ping-pong rows: ``calls`` timed ping-pongs after its untimed one."""
    _, nodes, _ = bench._replay(2, (), "gloo", iterations, 1, 300.0, None, (), (size,) * calls)
    return statistics.median(
        bench.round_trip_ns(nodes, 2 * (j + 1), it) / 1e3 for j in range(calls) for it in range(iterations)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=4096, help="bytes per all-reduce")
    ap.add_argument("--calls", type=int, default=8, help="all-reduces per iteration")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--p2p", action="store_true", help="time the ping-pong round trip instead")
    args = ap.parse_args()
    what = "ping-pong round trip" if args.p2p else "all-reduce"
    print(f"{os.cpu_count()} CPUs; {args.size} B {what}, 2 gloo ranks, {args.calls} calls x {args.iterations}")
    for r in range(args.rounds):
        if args.p2p:
            rep = replay_p2p_us(args.size, args.calls, args.iterations)
            send = bare_p2p_us(args.size, args.calls, args.iterations, blocking=True)
            wait = bare_p2p_us(args.size, args.calls, args.iterations, blocking=False)
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(
                f"round {r}: replay {rep:8.0f} us  bare send {send:8.0f} us  bare wait {wait:8.0f} us"
                f"  replay/bare wait {rep / wait:5.2f}  (load {load})"
            )
            continue
        rep = replay_us(args.size, args.calls, args.iterations)
        bare = bare_us(args.size, args.calls, args.iterations)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"round {r}: replay {rep:8.0f} us  bare {bare:8.0f} us  replay/bare {rep / bare:5.2f}  (load {load})")


if __name__ == "__main__":
    main()
