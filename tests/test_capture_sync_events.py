"""A GPU capture asks Kineto for its CUDA synchronization events.

DDP's Reducer waits for its gradient buckets through futures, which write no ``wait`` record into
the host trace; Kineto's "Stream Wait Event"s are then the only record that the optimizer's kernels
follow the bucket all-reduces (convert uses them, tests/test_convert_nccl_stream_wait.py).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from chakra_pipe.capture.worker import sync_event_config


def _fake_torch(calls: list[dict]) -> SimpleNamespace:
    def config(**kwargs):
        calls.append(kwargs)
        return ("config", kwargs)

    return SimpleNamespace(profiler=SimpleNamespace(_ExperimentalConfig=config))


def test_a_gpu_capture_enables_cuda_sync_events():
    calls: list[dict] = []
    assert sync_event_config(_fake_torch(calls), SimpleNamespace(type="cuda")) is not None
    assert calls == [{"enable_cuda_sync_events": True}]


def test_a_cpu_capture_asks_for_nothing():
    calls: list[dict] = []
    assert sync_event_config(_fake_torch(calls), SimpleNamespace(type="cpu")) is None
    assert calls == []


def test_the_pinned_torch_accepts_the_config():
    torch = pytest.importorskip("torch", reason="capture needs the optional torch extra (pip install -e '.[torch]')")
    config = sync_event_config(torch, torch.device("cuda"))
    assert isinstance(config, torch.profiler._ExperimentalConfig)
