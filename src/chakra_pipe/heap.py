"""Heap policy around phases that build and drop many temporaries (glibc; nothing elsewhere).

Freed chunks between live allocations stay resident until the allocator reuses them, so a phase's
temporaries (a rank set's decoding, its analysis, the symmetry proof) would otherwise be carried
by every later phase and set the command's peak: after loading a 1,024-file rank set 13 MB of the
167 MB resident were such pages, and the analysis and proof leave ~3 MB more (issue #15, peak RSS).
Those phases end with :func:`release_free_heap`.

Inside such a phase the opposite holds: glibc's default hands freed memory back as it goes (each
temporary at or above its adaptive mmap threshold, 128 KiB at first, is unmapped, and a heap top
above twice that is trimmed) and the next temporary faults the same pages in again. Loading the
1,024-file rank set took ~61k page faults that way (~0.15 s of system time in a 0.65 s load), ~21k
with :func:`keep_freed_heap`, which keeps freed memory for reuse until the phase's release.
"""

from __future__ import annotations

from typing import Any

_LIBC: list[Any] = []  # the C library once looked up (empty: not yet; [None]: no glibc or no ctypes)
_KEPT: list[int] = []  # the mmap threshold keep_freed_heap set (empty: never set)

_M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3


def _libc() -> Any:
    if not _LIBC:
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6")
            libc.malloc_trim, libc.mallopt  # noqa: B018 (both glibc's: AttributeError elsewhere)
            _LIBC.append(libc)
        except (ImportError, OSError, AttributeError):  # a Python without ctypes; not glibc
            _LIBC.append(None)
    return _LIBC[0]


def release_free_heap() -> None:
    """glibc's ``malloc_trim(0)`` (a few ms on a few hundred MB, microseconds on a small run's heap);
    nothing on other C libraries. After :func:`keep_freed_heap`, it also ends the keeping: from
    then on at most half the kept threshold lies free at the heap's top (the 8-layer rank set's
    command peaked at 88 MB instead of 78 MB when the rank-set analysis ran with 16 MiB kept)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
        if _KEPT:
            libc.mallopt(_M_TRIM_THRESHOLD, _KEPT[0] // 2)


def keep_freed_heap(mmap_threshold: int) -> None:
    """Until the next :func:`release_free_heap`, let glibc keep freed memory for reuse instead of
    handing it back and faulting it in again: blocks under ``mmap_threshold`` bytes come from the
    heap, and up to twice that may lie free at its top (glibc's own ratio between its adaptive
    thresholds); larger blocks are mapped and unmapped whole, as before. glibc has no way back to
    its adaptive thresholds: after the release, blocks under ``mmap_threshold`` still come from the
    heap, with at most half of it kept free (the 8-layer and 96-layer commands peak as before). A
    no-op where glibc refuses the threshold (above 512 KiB on a 32-bit build): a small fixed one
    would unmap every temporary, slower than its adaptive default."""
    libc = _libc()
    if libc is not None and libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold) == 1:
        libc.mallopt(_M_TRIM_THRESHOLD, 2 * mmap_threshold)
        _KEPT[:] = [mmap_threshold]
