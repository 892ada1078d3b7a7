"""Entry point of one capture rank: ``python -m chakra_pipe.capture.worker RUN_DIR RANK LOCAL_RANK``.

Reads ``job.json`` (model, steps, backend, store address) written by ``chakra_pipe.launch``; writes
``rank{r}.host_et.json.gz``, ``rank{r}.kineto.json.gz`` and ``times{r}.json`` into RUN_DIR on success
or ``error.{r}.json`` on failure (``peer`` says whether the error only reports a lost peer, so the
launcher names the rank that caused the failure, not the first one to notice it).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from ..atomic import atomic_open, write_json
from ..errors import InputError
from ..torchdist import PG_STORE_PREFIX, cuda_device, lost_peer
from .paths import host_path, kineto_path, times_path

WARMUP_STEPS = 2
RENDEZVOUS_TIMEOUT_S = 120


def _load_user_step(path: str, rank: int, world_size: int):
    """The script's ``train_step`` bound to this rank (contract in README.md)."""
    import runpy

    namespace = runpy.run_path(path, run_name="chakra_pipe_capture")
    fn = namespace.get("train_step")
    if not callable(fn):
        raise InputError("script defines no function train_step(rank, world_size)", file=path)
    return lambda: fn(rank, world_size)


def _gzip_into(src: Path, dst: Path) -> None:
    with open(src, "rb") as f, atomic_open(dst, "wb") as out:
        shutil.copyfileobj(f, out, 1 << 20)


def main(run_dir: str, rank: int, local_rank: int) -> int:
    """One rank: init the group, time untraced steps, then trace warm-up + ``steps`` active steps."""
    run = Path(run_dir)
    job = json.loads((run / "job.json").read_text())
    try:
        _capture(run, job, rank, local_rank)
        return 0
    except BaseException as exc:  # noqa: BLE001 - every failure becomes one line for the launcher
        text = str(exc).strip().splitlines()
        write_json(
            run / f"error.{rank}.json",
            {
                "rank": rank,
                "message": f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": "),
                "peer": lost_peer(exc),
                "traceback": traceback.format_exc(),
            },
        )
        return 1


def _capture(run: Path, job: dict, rank: int, local_rank: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import (
        ExecutionTraceObserver,
        ProfilerActivity,
        profile,
        schedule,
    )

    torch.set_num_threads(1)
    world, steps, model = job["world_size"], job["steps"], job["model"]
    device = cuda_device(torch, local_rank) if job["backend"] == "nccl" else torch.device("cpu")
    timeout = datetime.timedelta(seconds=RENDEZVOUS_TIMEOUT_S)
    store = dist.TCPStore(job["master_addr"], job["port"], None, False, timeout=timeout)
    dist.init_process_group(
        job["backend"], store=dist.PrefixStore(PG_STORE_PREFIX, store), rank=rank, world_size=world, timeout=timeout
    )
    if model.endswith(".py"):
        step = _load_user_step(model, rank, world)
    else:
        from .models import make_builtin_step

        step = make_builtin_step(model, rank, world, device, job.get("bucket_mb"))

    def timed_step() -> float:
        t0 = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3

    for _ in range(WARMUP_STEPS):
        step()
    dist.barrier()
    untraced = [timed_step() for _ in range(steps)]

    host_tmp = run / f"host{rank}.json"
    kineto_tmp = run / f"kineto{rank}.json"
    observer = ExecutionTraceObserver().register_callback(str(host_tmp))
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    traced: list[float] = []
    dist.barrier()
    with profile(
        activities=activities,
        schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
        record_shapes=True,
        experimental_config=sync_event_config(torch, device),
        execution_trace_observer=observer,
        on_trace_ready=lambda p: p.export_chrome_trace(str(kineto_tmp)),
    ) as prof:
        for _ in range(1 + steps):
            traced.append(timed_step())
            prof.step()
    observer.unregister_callback()
    dist.barrier()
    dist.destroy_process_group()
    _gzip_into(host_tmp, host_path(run, rank))
    _gzip_into(kineto_tmp, kineto_path(run, rank))
    write_json(times_path(run, rank), {"untraced": untraced, "traced": traced[1:]})


def sync_event_config(torch: Any, device: Any) -> Any:
    """On a GPU, ask Kineto for its CUDA synchronization events (``cuda_sync``, among them each
    "Stream Wait Event"): DDP's Reducer waits for its gradient buckets through futures, which leave
    no ``wait`` record in the host trace, so only these events tell convert that the optimizer's
    kernels follow the bucket all-reduces (``capture/README.md``). None on CPU (no device streams)."""
    if device.type != "cuda":
        return None
    return torch.profiler._ExperimentalConfig(enable_cuda_sync_events=True)


if __name__ == "__main__":
    os.environ["OMP_NUM_THREADS"] = "1"
    code = main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
