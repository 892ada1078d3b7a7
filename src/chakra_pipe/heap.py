"""Return freed heap pages to the system after a phase that built and dropped many temporaries.

Freed chunks between live allocations stay resident until the allocator reuses them, so a phase's
temporaries (a rank set's decoding, its analysis, the symmetry proof) would otherwise be carried
by every later phase and set the command's peak: after loading a 1,024-file rank set 13 MB of the
167 MB resident were such pages, and the analysis and proof leave ~3 MB more (issue #15, peak RSS).
"""

from __future__ import annotations

from typing import Any

_LIBC: list[Any] = []  # the C library's malloc_trim once looked up (empty: not yet; [None]: none)


def release_free_heap() -> None:
    """glibc's ``malloc_trim(0)`` (a few ms on a few hundred MB, microseconds on a small run's heap);
    nothing on other C libraries."""
    if not _LIBC:
        try:
            import ctypes

            _LIBC.append(ctypes.CDLL("libc.so.6").malloc_trim)
        except (ImportError, OSError, AttributeError):  # a Python without ctypes; not glibc
            _LIBC.append(None)
    if _LIBC[0] is not None:
        _LIBC[0](0)
