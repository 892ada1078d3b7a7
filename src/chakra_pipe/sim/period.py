"""The smallest period of a sequence, shared by the aware links (members repeating their paths) and
the ring recurrence (members repeating their start times): one definition, so the two periods that
``RingCoordinator.recurrence`` combines are computed alike."""

from __future__ import annotations

from collections.abc import Sequence


def smallest_period(seq: Sequence, step: int = 1) -> int:
    """The smallest multiple ``q`` of ``step`` that divides ``len(seq)`` with ``seq[q:] == seq[:len − q]``
    (element ``i`` equals element ``i mod q``); ``len(seq)`` when none is smaller."""
    p = len(seq)
    return next((q for q in range(step, p, step) if p % q == 0 and seq[q:] == seq[: p - q]), p)
