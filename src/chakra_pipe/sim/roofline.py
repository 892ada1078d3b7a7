"""ASTRA-sim's ``Roofline``: the runtime of a GPU compute node from its work and bytes (spec §2.4)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError


@dataclass(frozen=True)
class Roofline:
    """``perf = min(bandwidth · OI, peak)``; ``peak`` FLOP/s (``peak-perf`` · 10¹²), ``bandwidth`` B/s
    (``local-mem-bw`` · 10⁹)."""

    bandwidth: float
    peak: float
    source: str | None  # the system file, named when peak-perf is unusable

    @classmethod
    def of(cls, system) -> Roofline:
        return cls(system.local_mem_bw * 1e9, system.peak_perf * 1e12, system.source)

    def runtime_ns(self, num_ops: int, tensor_size: int) -> int:
        """⌊num_ops / perf · 10⁹⌋ ns for ``tensor_size`` > 0 (ASTRA-sim skips 0 as invalid before this)."""
        if self.peak <= 0:
            raise ConfigError("peak-perf must be > 0 when roofline-enabled is 1", file=self.source, where="peak-perf")
        ops = float(num_ops)  # float operands, as upstream: exact int division would round differently
        perf = min(self.bandwidth * (ops / float(tensor_size)), self.peak)
        # Zero work is zero time; ASTRA-sim computes 0/0 and prints 2^63 ns (README, deliberate differences).
        return int(ops / perf * 1e9) if num_ops else 0
