"""Random byte-level damage for decoder fuzz tests: the same edits everywhere a reader is compared
with protobuf's (a byte changed, a run cut, bytes inserted, the tail cut)."""

from __future__ import annotations

import random


def mutate(seed: bytes, rng: random.Random, max_cut: int = 3) -> bytes:
    """``seed`` after one to three random edits drawn from ``rng`` (cuts of 1..``max_cut`` bytes)."""
    data = bytearray(seed)
    for _ in range(rng.randint(1, 3)):
        if not data:
            break
        i, op = rng.randrange(len(data)), rng.random()
        if op < 0.5:
            data[i] = rng.randrange(256)
        elif op < 0.7:
            del data[i : i + rng.randint(1, max_cut)]
        elif op < 0.85:
            data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 3)))
        else:
            del data[i:]
    return bytes(data)
