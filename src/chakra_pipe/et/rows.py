"""``CsrRows``: a list of integer lists stored as one numpy array and row offsets.

The simulator asks for the children of each node once, when that node finishes. Building all
those lists up front cost more than loading the trace (a converted PyTorch trace has ~50
dependencies per node: 50 M Python ints at 1 M nodes, ~2 GB); a row materialised on access costs
one ``tolist`` of a slice, a fraction of a microsecond beside the ~100 µs the simulator spends per
node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import numpy as np


class CsrRows(Sequence[list[int]]):
    """Row ``i`` is ``values[ptr[i]:ptr[i + 1]]`` as a list of Python ints."""

    __slots__ = ("_ptr", "_values")

    def __init__(self, ptr: np.ndarray, values: np.ndarray):
        self._ptr = ptr.tolist()  # Python ints: indexing a list is several times cheaper than an array
        self._values = values

    def __len__(self) -> int:
        return len(self._ptr) - 1

    @overload
    def __getitem__(self, i: int) -> list[int]: ...

    @overload
    def __getitem__(self, i: slice) -> list[list[int]]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        ptr = self._ptr
        if not 0 <= i < len(ptr) - 1:
            if -len(ptr) < i < 0:
                i += len(ptr) - 1
            else:
                raise IndexError(f"row {i} of {len(ptr) - 1}")
        return self._values[ptr[i] : ptr[i + 1]].tolist()
