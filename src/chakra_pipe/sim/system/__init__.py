"""ASTRA-sim's system layer: chunking, queues, per-message overheads and the collective algorithms."""

from .sys import Sys

__all__ = ["Sys"]
