"""Entry point of one rank process: ``python -m chakra_pipe.replay.worker RUN_DIR RANK LOCAL_RANK``.

The launcher (``chakra_pipe.launch``) writes ``job.json`` (backend, store address, groups, settings, deadline) and
``plan.<rank>.pkl`` into RUN_DIR; the rank writes ``result.<rank>.json`` on success or
``error.<rank>.json`` on failure, and exits with os._exit so a dead peer can never make it hang in
process-group teardown. Every wait polls against the shared deadline.
"""

from __future__ import annotations

import datetime
import json
import os
import pickle
import signal
import sys
import time
from pathlib import Path

from ..atomic import write_json
from ..torchdist import PG_STORE_PREFIX, cuda_device, lost_peer
from . import status as st
from .executor import NodeFailed, ReplayTimeout, run_iteration, wait_work

EXIT_FAILED, EXIT_TIMEOUT = 1, 3


def main(run_dir: str, rank: int, local_rank: int) -> int:
    run = Path(run_dir)
    job = json.loads((run / "job.json").read_text())
    _die_with_launcher(job["launcher_pid"])
    with open(run / f"plan.{rank}.pkl", "rb") as f:
        plan = pickle.load(f)
    board = st.StatusBoard(run / "status.bin", job["world_size"])
    deadline = job["deadline_ns"]
    iteration = -1
    try:
        board.set(rank, st.CONNECTING)
        import torch
        import torch.distributed as dist

        from .engine import TorchEngine

        torch.set_num_threads(1)
        device = torch.device("cpu")
        if job["device"] == "cuda":
            device = cuda_device(torch, local_rank)
        remaining = max(1.0, (deadline - time.monotonic_ns()) / 1e9)
        timeout = datetime.timedelta(seconds=remaining)
        store = dist.TCPStore(job["master_addr"], job["port"], None, False, timeout=timeout)
        dist.init_process_group(
            job["backend"],
            store=dist.PrefixStore(PG_STORE_PREFIX, store),
            rank=rank,
            world_size=job["world_size"],
            timeout=timeout,
        )
        # Every rank creates every group, in the same order (torch.distributed requires it).
        groups = {name: dist.new_group(list(members)) for name, members in job["groups"].items()}
        engine = TorchEngine(plan, groups, device, job["compute"])
        walls, origins, starts, ends, calls = [], [], [], [], []
        total = job["warmup"] + job["iterations"]
        for iteration in range(total):
            _barrier(dist, deadline)
            board.set(rank, st.RUNNING, iteration)
            engine.new_iteration()
            timing = run_iteration(
                plan,
                engine,
                deadline,
                on_change=lambda busy, it=iteration: board.set(
                    rank,
                    st.RUNNING,
                    it,  # type: ignore[misc]
                    [plan.ids[i] for i in busy],
                ),
            )
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if iteration >= job["warmup"]:
                walls.append(timing.wall_ns)
                origins.append(timing.origin_ns)
                starts.append(timing.start_ns)
                ends.append(timing.end_ns)
                calls.append({str(i): b for i, b in sorted(engine.calls.items())})
        _barrier(dist, deadline)
        engine.close()
        write_json(
            run / f"result.{rank}.json",
            {
                "rank": rank,
                "iteration_wall_ns": walls,
                "iteration_origin_ns": origins,
                "start_ns": starts,
                "end_ns": ends,
                "call_bytes": calls,
                "replayed_ops": {str(i): v for i, v in sorted(engine.gemm_ops.items())},
                "environment": _environment(torch, job, device),
            },
            indent=None,
        )
        board.set(rank, st.DONE, iteration)
        dist.destroy_process_group()
        return 0
    except NodeFailed as exc:
        i = exc.index
        _fail(
            run,
            board,
            rank,
            iteration,
            "failed",
            str(exc),
            [plan.ids[i]],
            plan.describe(i),
            peer=lost_peer(exc.__cause__),
        )
        return EXIT_FAILED
    except ReplayTimeout as exc:
        where = ", ".join(plan.describe(i) for i in exc.in_flight) or (
            f"waiting to issue {plan.describe(exc.waiting[0])}" if exc.waiting else ""
        )
        _fail(
            run,
            board,
            rank,
            iteration,
            "timeout",
            "did not complete before the deadline",
            [plan.ids[i] for i in exc.in_flight],
            where,
        )
        return EXIT_TIMEOUT
    except _BarrierTimeout:
        _fail(
            run,
            board,
            rank,
            iteration,
            "timeout",
            "other ranks never reached the iteration barrier",
            [],
            "iteration barrier",
        )
        return EXIT_TIMEOUT
    except Exception as exc:  # noqa: BLE001 - rendezvous, group creation, allocation: one line to the user
        text = str(exc).strip().splitlines()
        _fail(
            run,
            board,
            rank,
            iteration,
            "error",
            f"{type(exc).__name__}: {text[0] if text else ''}",
            [],
            "",
            peer=lost_peer(exc),
        )
        return EXIT_FAILED


def _die_with_launcher(launcher_pid: int) -> None:
    """Ask Linux to SIGKILL this rank when the launcher dies, so no rank outlives a killed replay."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the launcher's own cleanup and the deadline still apply
    if os.getppid() != launcher_pid:  # the launcher died before the request took effect
        os._exit(EXIT_FAILED)


class _BarrierTimeout(Exception):
    pass


def _barrier(dist, deadline: int) -> None:
    """Align ranks between iterations without ever blocking past the deadline (the executor's
    polling policy, so gloo's worker threads are not starved when ranks outnumber cores)."""
    if not wait_work(dist.barrier(async_op=True), deadline):
        raise _BarrierTimeout()


def _fail(
    run: Path,
    board,
    rank: int,
    iteration: int,
    kind: str,
    message: str,
    nodes: list[int],
    where: str,
    peer: bool = False,
) -> None:
    board.set(rank, st.FAILED, iteration, nodes)
    write_json(
        run / f"error.{rank}.json",
        {
            "rank": rank,
            "iteration": iteration,
            "kind": kind,
            "message": message,
            "nodes": nodes,
            "where": where,
            "peer": peer,
        },
    )


def _environment(torch, job: dict, device) -> dict:
    return {
        "backend": job["backend"],
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch_version": torch.__version__,
        "python_version": sys.version.split()[0],
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS", ""),
        "cpu_count": os.cpu_count(),  # more ranks than CPUs makes CPU timings noisy
    }


if __name__ == "__main__":
    code = main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
