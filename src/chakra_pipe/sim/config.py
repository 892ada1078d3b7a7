"""ASTRA-sim configuration files parsed into frozen dataclasses.

Every key ASTRA-sim reads is parsed here, once, so the simulator never meets a malformed value in the
middle of a run. Keys that ASTRA-sim leaves uninitialised (or divides by) are required here and a
missing or ill-typed key is a :class:`ConfigError` naming the file and the key. ``from_dict`` exists so
that a sweep can override keys in memory without writing files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ..digits import is_int_text
from ..errors import ConfigError
from ..et.collectives import BY_NAME
from ..rankset.sizes import all_gather_too_small  # noqa: F401 -- the simulator checks it at run time too
from ..readfile import read_json, read_yaml
from .backends import DEFAULT, NAMES

ALGORITHMS = ("ring", "oneRing", "direct", "oneDirect", "halvingDoubling", "oneHalvingDoubling", "doubleBinaryTree")
TOPOLOGIES = ("Ring", "FullyConnected", "Switch")
MEMORY_TYPES = ("NO_MEMORY_EXPANSION", "PER_NODE_MEMORY_EXPANSION", "PER_NPU_MEMORY_EXPANSION", "MEMORY_POOL")
# The four collective-algorithm keys, in the order ASTRA-sim's Sys reads them.
IMPL_KEYS = {n: BY_NAME[n].impl_key for n in ("ALL_REDUCE", "REDUCE_SCATTER", "ALL_GATHER", "ALL_TO_ALL")}
# Chakra-defined custom collectives (spec §3.5): one prefix per collective type, or per workload node.
CUSTOM_KEYS = {kind: f"{key}-custom" for kind, key in IMPL_KEYS.items()}
PER_NODE_CUSTOM_KEY = "per-node-custom-implementation"

# System keys this simulator models (SystemConfig.from_dict reads them all).
MODELLED_SYSTEM_KEYS = frozenset(
    {
        "scheduling-policy",
        "collective-optimization",
        "endpoint-delay",
        "active-chunks-per-dimension",
        "preferred-dataset-splits",
        "local-mem-bw",
        "peak-perf",
        "roofline-enabled",
        "replay-only",
        "trace-enabled",
        "track-local-mem",
        "local-mem-trace-filename",
        "model-shared-bus",
        *IMPL_KEYS.values(),
        *CUSTOM_KEYS.values(),
        PER_NODE_CUSTOM_KEY,
    }
)
# Keys ASTRA-sim's examples carry that neither its analytical backends nor this simulator read, with the
# values under which ignoring them changes nothing.
IGNORED_SYSTEM_KEYS = {"boost-mode": 0, "intra-dimension-scheduling": "FIFO", "inter-dimension-scheduling": "ascending"}
# Every system key ASTRA-sim reads (astra-sim-semantics.md §5.2): the modelled ones, those refused here
# (LogGP parameters) and the ignored ones.
ASTRA_SIM_SYSTEM_KEYS = MODELLED_SYSTEM_KEYS | {
    "L",
    "o",
    "g",
    "G",
    "local-reduction-delay",
    *IGNORED_SYSTEM_KEYS,
}


@dataclass(frozen=True)
class Algorithm:
    """One entry of an ``*-implementation`` list: ``name`` plus the ``direct[W]`` window (-1 = all)."""

    name: str
    window: int = -1

    @property
    def one(self) -> bool:
        """``oneRing``/``oneDirect``/``oneHalvingDoubling`` span all NPUs, ignoring dimensions."""
        return self.name.startswith("one")

    @property
    def base(self) -> str:
        n = self.name[3:] if self.one else self.name
        return n[0].lower() + n[1:]


def parse_algorithm(text: Any, source: str, key: str) -> Algorithm:
    if not isinstance(text, str):
        raise ConfigError(f"algorithm must be a string, got {text!r}", file=source, where=key)
    for prefix in ("oneDirect", "direct"):
        if text.startswith(prefix) and text != prefix:
            tail = text[len(prefix) :]
            if not is_int_text(tail) or int(tail) <= 0:
                raise ConfigError(f"unknown algorithm {text!r}", file=source, where=key)
            return Algorithm(prefix, int(tail))
    if text not in ALGORITHMS:
        raise ConfigError(
            f"unknown algorithm {text!r} (known: {', '.join(ALGORITHMS)}, direct<W>)", file=source, where=key
        )
    return Algorithm(text)


def _load_json(path: str | Path) -> dict:
    data = read_json(path, error=ConfigError)
    if not isinstance(data, dict):
        raise ConfigError("expected a JSON object", file=str(path))
    return data


def _finite_number(v: Any) -> bool:
    """An int or float a double can hold (an int past 1.8e308 would overflow every float use)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


class _Reader:
    """Typed access to one config dict; every error names the file and the key."""

    def __init__(self, d: dict, source: str):
        if not isinstance(d, dict):
            raise ConfigError("expected a mapping", file=source)
        self.d, self.source = d, source

    def err(self, key: str, what: str) -> ConfigError:
        return ConfigError(what, file=self.source, where=key)

    def number(
        self,
        key: str,
        default: float | None = None,
        *,
        integer: bool = False,
        minimum: float | None = None,
        positive: bool = False,
    ) -> float:
        if key not in self.d:
            if default is None:
                raise self.err(key, "required key is missing")
            return default
        v = self.d[key]
        if not _finite_number(v):
            raise self.err(key, f"expected a number (finite), got {v!r}")
        if integer and v != int(v):
            raise self.err(key, f"expected an integer, got {v!r}")
        if positive and v <= 0:
            raise self.err(key, f"must be > 0, got {v!r}")
        if minimum is not None and v < minimum:
            raise self.err(key, f"must be >= {minimum}, got {v!r}")
        return int(v) if integer else float(v)

    def flag(self, key: str) -> bool:
        return self.number(key, 0, integer=True) != 0

    def choice(self, key: str, options: tuple[str, ...], default: str | None = None) -> str:
        if key not in self.d:
            if default is None:
                raise self.err(key, "required key is missing")
            return default
        v = self.d[key]
        if v not in options:
            raise self.err(key, f"unknown value {v!r} (expected one of {', '.join(options)})")
        return v

    def string(self, key: str, default: str) -> str:
        v = self.d.get(key, default)
        if not isinstance(v, str):
            raise self.err(key, f"expected a string, got {v!r}")
        return v

    def number_list(self, key: str) -> list:
        if key not in self.d:
            raise self.err(key, "required key is missing")
        v = self.d[key]
        if not isinstance(v, list) or not v:
            raise self.err(key, f"expected a non-empty list, got {v!r}")
        for x in v:
            if not _finite_number(x):
                raise self.err(key, f"expected numbers (finite), got {x!r}")
        return v


# Chunk streams per collective are about preferred-dataset-splits (time and memory grow linearly with it;
# ASTRA-sim's own configs use 1-64). Far past any real use, and a bound keeps 10^9 from running for days.
MAX_DATASET_SPLITS = 65_536


@dataclass(frozen=True)
class SystemConfig:
    """ASTRA-sim system JSON (spec §5.1). Times in ns; ``local_mem_bw`` GB/s (10^9), ``peak_perf`` TFLOPS."""

    scheduling_policy: str
    collective_optimization: str
    endpoint_delay: int
    active_chunks_per_dimension: int
    preferred_dataset_splits: int
    local_mem_bw: float
    peak_perf: float
    roofline_enabled: bool
    replay_only: bool
    trace_enabled: bool
    track_local_mem: bool
    local_mem_trace_filename: str
    model_shared_bus: bool
    endpoint_delay_given: bool
    implementations: tuple[tuple[str, tuple[Algorithm, ...]], ...]
    source: str = "<dict>"
    # Chakra-defined custom collectives (spec §3.5): (collective type, prefix) from the
    # ``*-implementation-custom`` keys and (workload node id, prefix) from the per-node YAML file.
    # Prefixes are kept as written: like upstream, they are paths relative to the working directory.
    custom: tuple[tuple[str, str], ...] = ()
    per_node_custom: tuple[tuple[int, str], ...] = ()

    @property
    def uses_custom(self) -> bool:
        """Whether some collective may run a custom (Chakra-defined) algorithm."""
        return bool(self.custom or self.per_node_custom)

    def custom_prefix(self, node_id: int, kind: str) -> str | None:
        """The custom prefix of workload node ``node_id`` (a ``kind`` collective), or None for the
        native algorithms: per-node custom > collective-wide custom > native (spec §3.5). The node id
        is looked up as upstream's ``static_cast<int>``: its low 32 bits, signed."""
        prefix = self._per_node_custom.get((node_id + (1 << 31)) % (1 << 32) - (1 << 31))
        if prefix is None:
            prefix = self._custom.get(kind)
        return prefix

    @cached_property
    def _per_node_custom(self) -> dict[int, str]:
        return dict(self.per_node_custom)

    @cached_property
    def _custom(self) -> dict[str, str]:
        return dict(self.custom)

    def implementation(self, kind: str) -> tuple[Algorithm, ...]:
        for k, algos in self.implementations:
            if k == kind:
                return algos
        raise ConfigError(
            f"collective {kind} used but the key is missing", file=self.source, where=IMPL_KEYS.get(kind, kind)
        )

    @classmethod
    def from_file(cls, path: str | Path) -> SystemConfig:
        return cls.from_dict(_load_json(path), source=str(path))

    @classmethod
    def from_dict(cls, d: dict, source: str = "<dict>") -> SystemConfig:
        r = _Reader(d, source)
        impls = []
        for kind, key in IMPL_KEYS.items():
            if key in d:
                v = d[key]
                if not isinstance(v, list) or not v:
                    raise r.err(key, f"expected a non-empty list of algorithm names, got {v!r}")
                impls.append((kind, tuple(parse_algorithm(x, source, key) for x in v)))
        custom = tuple((kind, _custom_prefix(r, key)) for kind, key in CUSTOM_KEYS.items() if key in d)
        per_node = _per_node_custom(r) if PER_NODE_CUSTOM_KEY in d else ()
        splits = r.number("preferred-dataset-splits", None, integer=True, minimum=1)
        if splits > MAX_DATASET_SPLITS:
            raise r.err(
                "preferred-dataset-splits",
                f"{splits} is past the supported {MAX_DATASET_SPLITS}: each split is "
                "a chunk stream per collective and NPU, simulated one by one",
            )
        model_shared_bus = r.flag("model-shared-bus")
        if model_shared_bus:
            raise r.err("model-shared-bus", "the LogGP shared-bus model (1) is not supported; use 0")
        return cls(
            scheduling_policy=r.choice("scheduling-policy", ("LIFO", "FIFO", "EXPLICIT")),
            collective_optimization=r.choice("collective-optimization", ("baseline", "localBWAware")),
            endpoint_delay=int(r.number("endpoint-delay", 10, integer=True, minimum=0)),
            active_chunks_per_dimension=int(r.number("active-chunks-per-dimension", 1, integer=True, minimum=1)),
            preferred_dataset_splits=int(splits),
            local_mem_bw=r.number("local-mem-bw", None, positive=True),
            peak_perf=r.number("peak-perf", 0.0, minimum=0),
            roofline_enabled=r.flag("roofline-enabled"),
            replay_only=r.flag("replay-only"),
            trace_enabled=r.flag("trace-enabled"),
            track_local_mem=r.flag("track-local-mem"),
            local_mem_trace_filename=r.string("local-mem-trace-filename", "local_mem_trace"),
            model_shared_bus=model_shared_bus,
            endpoint_delay_given="endpoint-delay" in d,
            implementations=tuple(impls),
            source=source,
            custom=custom,
            per_node_custom=per_node,
        )


def _custom_prefix(r: _Reader, key: str) -> str:
    """The one prefix of an ``*-implementation-custom`` list (upstream reads exactly one entry)."""
    v = r.d[key]
    if not isinstance(v, list) or len(v) != 1 or not isinstance(v[0], str) or not v[0]:
        raise r.err(key, f"expected a list of exactly one custom-collective prefix (a string), got {v!r}")
    return v[0]


def _per_node_custom(r: _Reader) -> tuple[tuple[int, str], ...]:
    """``per-node-custom-implementation``: a YAML file ``{chakra_node_id: prefix}``, its path (and the
    prefixes) relative to the working directory, as upstream opens them."""
    path = r.d[PER_NODE_CUSTOM_KEY]
    if not isinstance(path, str) or not path:
        raise r.err(PER_NODE_CUSTOM_KEY, f"expected the path of a YAML file, got {path!r}")
    table = read_yaml(path, error=ConfigError)
    if not isinstance(table, dict):
        raise ConfigError("expected a mapping {chakra_node_id: custom-collective prefix}", file=path)
    out = []
    for nid, prefix in table.items():
        # upstream reads keys as a C int (parse_per_node_yaml_file: as<int>(), which throws otherwise)
        if isinstance(nid, bool) or not isinstance(nid, int) or not -(1 << 31) <= nid < 1 << 31:
            raise ConfigError(
                f"expected a node id (a 32-bit signed integer, as upstream reads it), got {nid!r}",
                file=path,
                where=str(nid),
            )
        if not isinstance(prefix, str) or not prefix:
            raise ConfigError(
                f"expected a custom-collective prefix (a string), got {prefix!r}", file=path, where=str(nid)
            )
        out.append((nid, prefix))
    return tuple(out)


@dataclass(frozen=True)
class NetworkConfig:
    """ASTRA-sim analytical network YAML (spec §5.3); bandwidth in GB/s with GB = 2^30 bytes."""

    topology: tuple[str, ...]
    npus_count: tuple[int, ...]
    bandwidth: tuple[float, ...]
    latency: tuple[float, ...]
    source: str = "<dict>"

    @property
    def npus(self) -> int:
        return math.prod(self.npus_count)

    @property
    def dims(self) -> int:
        return len(self.topology)

    @classmethod
    def from_file(cls, path: str | Path) -> NetworkConfig:
        return cls.from_dict(read_yaml(path, error=ConfigError), source=str(path))

    @classmethod
    def from_dict(cls, d: dict, source: str = "<dict>") -> NetworkConfig:
        r = _Reader(d, source)
        topo = d.get("topology")
        if not isinstance(topo, list) or not topo:
            raise r.err("topology", f"expected a non-empty list, got {topo!r}")
        for t in topo:
            if t not in TOPOLOGIES:
                raise r.err("topology", f"unknown topology {t!r} (expected one of {', '.join(TOPOLOGIES)})")
        npus, bw, lat = r.number_list("npus_count"), r.number_list("bandwidth"), r.number_list("latency")
        for key, lst in (("npus_count", npus), ("bandwidth", bw), ("latency", lat)):
            if len(lst) != len(topo):
                raise r.err(key, f"has {len(lst)} entries but topology has {len(topo)}")
        single = all(n == 1 for n in npus)  # one NPU: a one-GPU trace's compute what-ifs (not ASTRA-sim)
        for n in npus:
            if n != int(n) or n < 2 and not single:
                raise r.err("npus_count", f"each entry must be an integer > 1 (or all 1 for a single NPU), got {n!r}")
        for b in bw:
            if b <= 0:
                raise r.err("bandwidth", f"must be > 0, got {b!r}")
        for x in lat:
            if x < 0:
                raise r.err("latency", f"must be >= 0, got {x!r}")
        return cls(
            tuple(topo), tuple(int(n) for n in npus), tuple(float(b) for b in bw), tuple(float(x) for x in lat), source
        )


@dataclass(frozen=True)
class MemoryConfig:
    """ASTRA-sim remote-memory JSON (spec §5.2); ``remote_mem_bw`` is bytes per ns."""

    memory_type: str
    num_nodes: int = 0
    num_npus_per_node: int = 0
    remote_mem_latency: int = 0
    remote_mem_bw: int = 0
    source: str = "<dict>"

    @classmethod
    def from_file(cls, path: str | Path) -> MemoryConfig:
        return cls.from_dict(_load_json(path), source=str(path))

    @classmethod
    def from_dict(cls, d: dict, source: str = "<dict>") -> MemoryConfig:
        r = _Reader(d, source)
        mtype = r.choice("memory-type", MEMORY_TYPES)
        per_node = mtype == "PER_NODE_MEMORY_EXPANSION"
        active = mtype != "NO_MEMORY_EXPANSION"
        return cls(
            memory_type=mtype,
            num_nodes=r.number("num-nodes", None if per_node else 0, integer=True, minimum=1 if per_node else 0),  # type: ignore[arg-type]
            num_npus_per_node=r.number(
                "num-npus-per-node",
                None if per_node else 0,
                integer=True,  # type: ignore[arg-type]
                minimum=1 if per_node else 0,
            ),
            remote_mem_latency=r.number("remote-mem-latency", 0, integer=True, minimum=0),  # type: ignore[arg-type]
            remote_mem_bw=r.number(
                "remote-mem-bw",
                None if active else 0,
                integer=True,  # type: ignore[arg-type]
                minimum=1 if active else 0,
            ),
            source=source,
        )


@dataclass(frozen=True)
class HardwareConfig:
    """Everything a simulation needs besides the trace: system, network, memory and backend."""

    system: SystemConfig
    network: NetworkConfig
    memory: MemoryConfig | None = None
    backend: str = DEFAULT
    num_queues_per_dim: int = 1
    injection_scale: float = 1.0
    rendezvous: bool = False

    def __post_init__(self) -> None:
        if self.backend not in NAMES:
            raise ConfigError(f"unknown backend {self.backend!r} (expected {' or '.join(NAMES)})", where="backend")
        if self.num_queues_per_dim < 1:
            raise ConfigError("must be >= 1", where="--num-queues-per-dim")
        if not (self.injection_scale > 0):
            raise ConfigError("must be > 0", where="--injection-scale")
        for kind, algos in self.system.implementations:
            if len(algos) > self.network.dims:
                raise ConfigError(
                    f"{len(algos)} algorithms listed but the network ({self.network.source}) has "
                    f"{self.network.dims} dimension(s)",
                    file=self.system.source,
                    where=IMPL_KEYS[kind],
                )

    @property
    def endpoint_delay(self) -> int:
        """E in ns: ``--injection-scale`` multiplies it only when the key is present (ASTRA-sim)."""
        e = self.system.endpoint_delay
        return int(e * self.injection_scale) if self.system.endpoint_delay_given else e


def load_hardware(
    system: str | Path,
    network: str | Path,
    memory: str | Path | None = None,
    backend: str = DEFAULT,
    **options: Any,
) -> HardwareConfig:
    """Parse the three ASTRA-sim files into one :class:`HardwareConfig`."""
    return HardwareConfig(
        system=SystemConfig.from_file(system),
        network=NetworkConfig.from_file(network),
        memory=MemoryConfig.from_file(memory) if memory else None,
        backend=backend,
        **options,
    )
