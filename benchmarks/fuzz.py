"""The long fuzzing run: mutated traces, configs and JSON traces through every reader and verb.

The CI versions are ``tests/test_robust_fuzz.py`` and ``tests/test_robust_decoders.py`` (seconds).
This script runs the same contracts for as long as you give it and keeps every failing input:

    python benchmarks/fuzz.py --minutes 30 [--surface all|sets|decoders|readers|dejsonize] [--seed 1]
                              [--out DIR] [--timeout 30] [--memory-gb 4]

Surfaces (``all`` cycles through them):

* ``sets`` — the committed corpus' rank sets (``tests/data/robust/traces``) plus a generated LLM set,
  one or two rank files mutated (bit flips, overwrites, truncation, insertion, deletion, huge length
  prefixes, gzip, dropped/duplicated/swapped/spliced records, 10-byte varints), through the strict
  reader, the graph loader, ``validate`` and ``simulate``.
* ``decoders`` — 1-4 byte edits of small (record-by-record) and 70-node (vectorised) traces, plain or
  gzip-compressed (edits before or after compression), through both decoder paths, compared with the
  protobuf runtime itself: both must accept exactly what it accepts and read the same nodes.
* ``readers`` — system/remote-memory/comm-group JSON and network YAML with hostile edits (numeric
  extremes, NaN/inf, 5,000-digit numbers, duplicate keys, aliases and alias bombs, deep nesting,
  invalid UTF-8, gzip bombs) through the config loaders; JSON a strict parse refuses must be refused.
* ``dejsonize`` — jsonized traces with hostile values, kinds and shapes through ``dejsonize``; a
  written ``.et`` must read back with protobuf and hold no infinity the JSON did not spell out.

Contract: a result, or a ``ChakraPipeError`` with exit code 1/2/3 and a one-line message naming a
file; within ``--timeout`` seconds; peak memory under ``--memory-gb``. Each violation is classed as a
traceback, a hang, a silent wrong exit (an answer where the reference refuses, or a different answer)
or a bad error, written to ``OUT/<n>-<surface>/`` with ``what.txt``, and counted; the run goes on.
Prints progress every minute and a final ``SUMMARY`` line; exit status 1 when anything was found.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import random
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
import zlib
from collections import Counter
from pathlib import Path

from chakra_pipe.atomic import write_bytes, write_text
from chakra_pipe.errors import ChakraPipeError, TraceFormatError
from chakra_pipe.et.framing import read_trace
from chakra_pipe.et.graph import load_graph
from chakra_pipe.et.traceset import TraceSet

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "data" / "robust" / "traces"
SYSTEM = (
    '{"scheduling-policy": "LIFO", "collective-optimization": "baseline", "endpoint-delay": 10, '
    '"preferred-dataset-splits": 4, "local-mem-bw": 1600, "peak-perf": 900, "roofline-enabled": 1, '
    '"all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"], '
    '"reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["ring"]}'
)


class Expired(Exception):
    """A verb ran past its time bound."""


class SilentWrong(Exception):
    """A reader answered where the reference refuses, or answered differently."""


def _expire(signum, frame):
    raise Expired()


def records(data: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` byte spans of the framed records, as far as the framing is intact."""
    spans, pos = [], 0
    while pos < len(data):
        start, length, shift = pos, 0, 0
        while pos < len(data) and pos - start < 5:
            b = data[pos]
            pos += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        if pos + length > len(data):
            break
        pos += length
        spans.append((start, pos))
    return spans


def mutate(rng: random.Random, data: bytes, donor: bytes) -> tuple[bytes, str]:
    """One random edit of ``data`` (``donor`` is another file for splicing); returns bytes and a label."""
    b = bytearray(data)
    spans = records(data)[1:]  # node records; the metadata record is left to byte-level edits
    # Record-level edits keep the framing valid more often, so they reach validate and simulate.
    op = rng.choice(
        [
            "flip",
            "set",
            "truncate",
            "insert",
            "delete",
            "huge_prefix",
            "cut_record",
            "max_varint",
            "gzip",
            *["drop_record", "dup_record", "swap_records", "splice"] * 3,
        ]
    )
    if not b:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))), "random"
    i = rng.randrange(len(b))
    if op == "flip":
        b[i] ^= 1 << rng.randrange(8)
    elif op == "set":
        b[i] = rng.randrange(256)
    elif op == "truncate":
        del b[i:]
    elif op == "insert":
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    elif op == "delete":
        del b[i : i + rng.randint(1, 8)]
    elif op == "huge_prefix":
        b[i:i] = rng.choice([b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\x01", b"\x80\x80\x80\x80"])
    elif op == "max_varint":
        b[i:i] = b"\xff" * 9 + b"\x01"
    elif op == "gzip":  # readers detect gzip by magic bytes; later edits then hit the compressed stream
        b = bytearray(gzip.compress(data, mtime=0))
    elif spans and op == "drop_record":
        s, e = rng.choice(spans)
        del b[s:e]
    elif spans and op == "dup_record":
        s, e = rng.choice(spans)
        b[e:e] = data[s:e]
    elif len(spans) > 1 and op == "swap_records":
        (s1, e1), (s2, e2) = sorted(rng.sample(spans, 2))
        b = bytearray(data[:s1] + data[s2:e2] + data[e1:s2] + data[s1:e1] + data[e2:])
    elif spans and op == "splice":
        donor_spans = records(donor)[1:]
        if donor_spans:
            s, e = rng.choice(donor_spans)
            at = rng.choice(spans)[1]
            b[at:at] = donor[s:e]
    elif spans and op == "cut_record":
        s, e = rng.choice(spans)
        del b[rng.randint(s + 1, max(s + 1, e - 1)) : e]
    else:
        b[i] ^= 0xFF
        op = "invert"
    return bytes(b), op


# -- decoders against the protobuf runtime (also imported by tests/test_robust_decoders.py) ------


def protobuf_accepts(data: bytes) -> list | None:
    """The protobuf runtime's reading of a decompressed ``.et`` file: its nodes, or None if refused.

    An independent reference for both decoder paths: the framing rules (length prefix of at most
    5 bytes, no zero-length node record, a GlobalMetadata first), then ``FromString`` on each record
    and our refusal of unknown fields in Node, GlobalMetadata and AttributeProto. Nothing else.
    """
    from google.protobuf.message import DecodeError
    from google.protobuf.unknown_fields import UnknownFieldSet

    from chakra_pipe.et import schema

    pos, nodes, first = 0, [], True
    while pos < len(data):
        length, shift, nbytes = 0, 0, 0
        while True:
            if pos >= len(data) or nbytes == 5:
                return None
            b = data[pos]
            pos, nbytes, shift = pos + 1, nbytes + 1, shift + 7
            length |= (b & 0x7F) << (shift - 7)
            if b < 0x80:
                break
        if length > len(data) - pos or (length == 0 and not first):
            return None
        try:
            msg = (schema.GlobalMetadata if first else schema.Node).FromString(data[pos : pos + length])
        except DecodeError:
            return None
        if any(len(UnknownFieldSet(m)) for m in [msg, *msg.attr]):
            return None
        if not first:
            nodes.append(msg)
        pos, first = pos + length, False
    return None if first else nodes


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """1-4 byte-level edits (flip, overwrite, truncate, insert, delete) at random positions."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not b:
            break
        op, i = rng.choice(["flip", "set", "set", "truncate", "insert", "delete"]), rng.randrange(len(b))
        if op == "flip":
            b[i] ^= 1 << rng.randrange(8)
        elif op == "set":
            b[i] = rng.randrange(256)
        elif op == "truncate":
            del b[i:]
        elif op == "insert":
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        else:
            del b[i : i + rng.randint(1, 4)]
    return bytes(b)


def rich_trace(count: int = 70) -> bytes:
    """A ``count``-node trace using every part of the format a decoder must check: names, IOInfo
    strings, string, bool-list, int-list, float and double attributes, p2p and collective nodes.
    70 nodes is past ``graph._SMALL``, so it takes the vectorised path."""
    from chakra_pipe.et import schema
    from chakra_pipe.et.attrs import set_attr
    from chakra_pipe.et.framing import frame

    nodes = []
    for i in range(1, count + 1):
        kind = [schema.COMP_NODE, schema.COMM_COLL_NODE, schema.COMM_SEND_NODE][i % 3]
        node = schema.Node(id=i, name=f"node_{i}", type=kind, duration_micros=i * 3, start_time_micros=i)
        node.data_deps.extend([i - 1] if i > 1 else [])
        node.ctrl_deps.extend([i - 2] if i > 2 else [])
        node.inputs.values, node.inputs.shapes, node.inputs.types = f"[{i}]", "[[4, 4]]", "['float']"
        node.outputs.shapes = "[[16]]" if i % 2 else "[" + "[2048]" * 30 + "]"
        set_attr(node, "is_cpu_op", False)
        set_attr(node, "tensor_size", 4096 * i)
        if kind == schema.COMM_COLL_NODE:
            set_attr(node, "comm_type", schema.ALL_REDUCE)
            set_attr(node, "comm_size", 1 << 20)
            set_attr(node, "pg_name", f"pg{i % 4}")
            set_attr(node, "involved_dim", [True, False, True])
        elif kind == schema.COMM_SEND_NODE:
            set_attr(node, "comm_dst", 1)
            set_attr(node, "comm_tag", i)
            node.attr.add(name="op_schema", string_val="aten::send(Tensor t) -> ()")
            node.attr.add(name="scales", double_list=schema.CLASSES["DoubleList"](values=[0.5, 2.0]))
        else:
            set_attr(node, "num_ops", 1000 * i)
            node.attr.add(name="rf_ids", int64_list=schema.CLASSES["Int64List"](values=[i % 100, 7]))
            node.attr.add(name="ratio", float_val=0.25)
        nodes.append(node)
    md = schema.GlobalMetadata(version="0.0.4")
    return frame(md.SerializeToString()) + b"".join(frame(n.SerializeToString()) for n in nodes)


def decoder_bases() -> dict[str, bytes]:
    """Valid traces for decoder fuzzing: two small corpus files (record-by-record path) and a rich
    70-node one (vectorised path)."""
    return {
        "small": (CORPUS / "valid.0.et").read_bytes(),
        "p2p": (CORPUS / "mismatched_tag.0.et").read_bytes(),
        "rich": rich_trace(),
    }


def _node_tuples(ids, types, durs, data, ctrl, pg) -> list[tuple]:
    return list(zip(ids, types, durs, data, ctrl, pg))


def _expected_tuples(nodes: list) -> list[tuple]:
    def pg(n):
        last = [a for a in n.attr if a.name == "pg_name"]
        return last[-1].string_val if last and last[-1].WhichOneof("value") == "string_val" else None

    return _node_tuples(
        [n.id for n in nodes],
        [max(-1, min(127, n.type)) for n in nodes],
        [n.duration_micros for n in nodes],
        [list(n.data_deps) for n in nodes],
        [list(n.ctrl_deps) for n in nodes],
        [pg(n) for n in nodes],
    )


def _graph_tuples(path: Path) -> list[tuple]:
    g = load_graph(path)
    n = len(g)
    return _node_tuples(
        g.ids.tolist(),
        g.types.tolist(),
        g.duration_micros.tolist(),
        [g.data_deps(i).tolist() for i in range(n)],
        [g.ctrl_deps(i).tolist() for i in range(n)],
        [g.pg_name.get(i) for i in range(n)],
    )


def decoders_agree(path: Path, data: bytes) -> str:
    """Both decoder paths (and the streaming reader) accept exactly what protobuf accepts, read the
    same nodes, and refuse with a byte offset inside the (decompressed) file."""
    plain: bytes | None = data
    if data[:2] == b"\x1f\x8b":  # the reference reads gzip with Python's own streaming reader
        try:
            plain = gzip.GzipFile(fileobj=io.BytesIO(data)).read()
        except (OSError, EOFError, zlib.error):
            plain = None
    expected = protobuf_accepts(plain) if plain is not None else None
    for name, read in (("load_graph", _graph_tuples), ("read_trace", lambda p: _expected_tuples(read_trace(p)[1]))):
        try:
            got = read(path)
        except TraceFormatError as exc:
            if expected is not None:
                raise SilentWrong(f"{name} refused a file protobuf reads: {exc.line()}") from None
            if exc.file != str(path) or not (exc.where or "").startswith("byte ") and "gzip" not in exc.what:
                raise SilentWrong(f"{name} refused without naming file and byte offset: {exc.line()}") from None
            continue
        if expected is None:
            raise SilentWrong(f"{name} read a file the protobuf runtime refuses")
        if got != _expected_tuples(expected):
            raise SilentWrong(f"{name} read different nodes than protobuf")
    return "refused" if expected is None else "accepted"


def _load_system(path: Path):
    from chakra_pipe.sim.config import SystemConfig

    return SystemConfig.from_file(path)


def _load_memory(path: Path):
    from chakra_pipe.sim.config import MemoryConfig

    return MemoryConfig.from_file(path)


def _load_network(path: Path):
    from chakra_pipe.sim.config import NetworkConfig

    return NetworkConfig.from_file(path)


def _load_groups(path: Path):
    from chakra_pipe.et.traceset import load_comm_groups

    return load_comm_groups(path)


READER_BASES = {
    "system": (".json", SYSTEM, _load_system),
    "memory": (
        ".json",
        (
            '{"memory-type": "PER_NODE_MEMORY_EXPANSION", "num-nodes": 1, "num-npus-per-node": 4, '
            '"remote-mem-latency": 10, "remote-mem-bw": 100}'
        ),
        _load_memory,
    ),
    "comm_groups": (".json", '{"1": [0, 1], "2": [2, 3], "3": [0, 1, 2, 3]}', _load_groups),
    "network": (
        ".yml",
        ("topology: [ Ring, Switch ]\nnpus_count: [ 2, 2 ]\nbandwidth: [ 50.0, 25 ]\nlatency: [ 500.0, 10 ]\n"),
        _load_network,
    ),
}
HOSTILE_NUMBERS = [
    "0",
    "-1",
    "1e999",
    "-1e999",
    "1e-400",
    "1e308",
    "1.5e3",
    "NaN",
    "Infinity",
    "-Infinity",
    ".inf",
    ".nan",
    str(2**63 - 1),
    str(2**63),
    str(2**64),
    str(-(2**63) - 1),
    "9" * 5000,
    "1" + "0" * 400,
    "0x10",
    "1_000",
    "true",
    "null",
    '"7"',
    "[]",
    "{}",
]
_NUMBER = re.compile(r"(?<![\w.\"])-?[0-9]+(?:\.[0-9]+)?(?![\w.\"])")
_BOMB: list[bytes] = []


def _gzip_bomb() -> bytes:
    """300 MB of blanks, gzip-compressed (about 300 KB; built once)."""
    if not _BOMB:
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        blanks = b" " * (1 << 20)
        _BOMB.append(b"".join(packer.compress(blanks) for _ in range(300)) + packer.flush())
    return _BOMB[0]


def _alias_bomb(levels: int) -> str:
    lines = ["b0: &b0 [" + ", ".join(["xxxxxxxx"] * 10) + "]"]
    lines += [f"b{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def hostile_text(rng: random.Random, text: str, *, yaml: bool) -> tuple[bytes, list[str]]:
    """1-3 hostile edits of a config file's text."""
    labels = []
    data: bytes | None = None
    for _ in range(rng.randint(1, 3)):
        op = rng.choice(["number", "number", "number", "dup", "nest", "bytes", "gzip", "bomb"] + ["alias"] * yaml)
        labels.append(op)
        spans = [m.span() for m in _NUMBER.finditer(text)]
        if op == "number" and spans:
            a, b = rng.choice(spans)
            text = text[:a] + rng.choice(HOSTILE_NUMBERS) + text[b:]
        elif op == "dup":
            if yaml:
                first = text.splitlines(keepends=True)[0]
                text = text + first
            else:
                m = re.search(r'"[^"]*": [^,}]*', text)
                if m:
                    text = text.rstrip().rstrip("}") + ", " + m.group(0) + "}"
        elif op == "nest" and spans:
            a, b = rng.choice(spans)
            depth = rng.choice([50, 5000, 200000])
            text = text[:a] + "[" * depth + "1" + "]" * depth + text[b:]
        elif op == "alias" and spans:
            a, b = rng.choice(spans)
            levels = rng.choice([3, 7, 10])
            text = _alias_bomb(levels) + text[:a] + f"*b{levels - 1}" + text[b:]
        elif op == "bytes":
            data = mutate_bytes(rng, (data or text.encode()))
        elif op == "gzip":
            data = gzip.compress(data or text.encode(), mtime=0)
        elif op == "bomb":
            data = _gzip_bomb()
    return (data if data is not None else text.encode()), labels


def _strict_json_refuses(data: bytes) -> bool:
    """Whether a strict reading of ``data`` refuses it: not UTF-8, not JSON, a duplicate key, a
    non-finite or over-long number (what our reader must refuse too)."""

    def unique(pairs):
        if len({k for k, _ in pairs}) != len(pairs):
            raise ValueError("duplicate")
        return dict(pairs)

    def finite(text):
        if not math.isfinite(float(text)):
            raise ValueError("inf")
        return float(text)

    def constant(text):
        raise ValueError(text)

    try:
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        json.loads(data.decode("utf-8"), object_pairs_hook=unique, parse_float=finite, parse_constant=constant)
    except (ValueError, RecursionError, OSError, EOFError, zlib.error):
        return True
    return False


def reader_contract(load, path: Path, data: bytes, suffix: str) -> str:
    load(path)
    if suffix == ".json" and _strict_json_refuses(data):
        raise SilentWrong("a config loader accepted JSON that a strict parse refuses")
    return "ok"


def jsonio_doc(trace: bytes) -> dict:
    """The jsonized form of a trace (what ``chakra-pipe jsonize`` writes)."""
    from chakra_pipe.et.framing import parse_metadata, parse_node, scan_records
    from chakra_pipe.et.jsonio import metadata_to_json, node_to_json

    starts, lengths = scan_records(trace)
    md = parse_metadata(trace[starts[0] : starts[0] + lengths[0]])
    nodes = [node_to_json(parse_node(trace[s : s + n])) for s, n in zip(starts[1:], lengths[1:])]
    return {"metadata": metadata_to_json(md), "nodes": nodes}


HOSTILE_KINDS = [
    "[1]",
    "{}",
    "null",
    '"float_val"',
    '"double_val"',
    '"double_list"',
    '"bool_list"',
    '"bytes_val"',
    '"nope"',
    "5",
    '"uint64_val"',
    '"int32_val"',
]
HOSTILE_VALUES = [
    '"1e300"',
    "1e300",
    '"Infinity"',
    '"NaN"',
    "[1e39]",
    '["3.5e38"]',
    '{"a": 1}',
    '"AAAA"',
    '"!!"',
    "-1",
    str(2**64),
    "1" + "0" * 400,
    "[true, 2]",
    "null",
    '"' + "x" * 100 + '"',
]


def hostile_json_trace(rng: random.Random, text: str) -> tuple[bytes, list[str]]:
    """1-3 hostile edits of a jsonized trace: values, kinds, value shapes, node fields, bytes."""
    labels = []
    data: bytes | None = None
    for _ in range(rng.randint(1, 3)):
        op = rng.choice(["number", "kind", "value", "field", "bytes"])
        labels.append(op)
        if op == "number":
            spans = [m.span() for m in _NUMBER.finditer(text)]
            if spans:
                a, b = rng.choice(spans)
                text = text[:a] + rng.choice(HOSTILE_NUMBERS[:18]) + text[b:]
        elif op in ("kind", "value"):
            spans = [m.span(1) for m in re.finditer(rf'"{op}": ("[^"]*"|[^,}}\]]*)', text)]
            if spans:
                a, b = rng.choice(spans)
                text = text[:a] + rng.choice(HOSTILE_KINDS if op == "kind" else HOSTILE_VALUES) + text[b:]
        elif op == "field":
            spans = [m.span(1) for m in re.finditer(r'"(?:id|type|name|duration_micros)": ("[^"]*"|[^,}]*)', text)]
            if spans:
                a, b = rng.choice(spans)
                text = text[:a] + rng.choice(HOSTILE_VALUES + ['"NOPE"', "[]"]) + text[b:]
        else:
            data = mutate_bytes(rng, data or text.encode())
    return (data if data is not None else text.encode()), labels


def dejsonize_contract(src: Path, dst: Path, data: bytes) -> str:
    """dejsonize refuses cleanly, or writes a trace protobuf reads back without invented infinities."""
    from chakra_pipe.et.jsonio import dejsonize

    dejsonize(src, dst)
    nodes = protobuf_accepts(dst.read_bytes())
    if nodes is None:
        raise SilentWrong("dejsonize wrote a trace the protobuf runtime refuses")
    spelled = b"Infinity" in data or b"NaN" in data
    for node in nodes:
        for attr in node.attr:
            kind = attr.WhichOneof("value") or ""
            values = getattr(attr, kind).values if kind.endswith("_list") else [getattr(attr, kind, 0)]
            if kind.startswith(("float", "double")) and not spelled and not all(map(math.isfinite, values)):
                raise SilentWrong(f"dejsonize turned a finite {kind} into infinity/NaN (node {node.id})")
    return "ok"


def _graph_accepts(path: str) -> bool:
    """Whether the graph loader reads the whole file, attributes and every record included."""
    try:
        g = load_graph(path)
        g.attr_kind  # noqa: B018 -- attributes decode lazily
        for i in range(len(g)):
            g.node(i)
    except TraceFormatError:
        return False
    return True


def generated_set(directory: Path) -> Path:
    """A DP×TP×PP LLM step (8 ranks, process groups, 70 nodes per rank: more than the graph loader's
    record-by-record limit, so the vectorised decoder is fuzzed too) from the project's own generator."""
    from chakra_pipe.cli import main

    prefix = directory / "llm" / "t"
    main(
        [
            "generate",
            "llm",
            "--model",
            "llama3-8b",
            "--layers",
            "8",
            "--hidden",
            "256",
            "--ffn",
            "512",
            "--heads",
            "4",
            "--vocab",
            "1000",
            "--seq",
            "64",
            "--dp",
            "2",
            "--tp",
            "2",
            "--pp",
            "2",
            "--out",
            str(prefix),
        ]
    )
    return prefix


def rank_sets(directory: Path) -> list[tuple[Path, int]]:
    """Every decodable corpus set (the undecodable ones are already mutations) and a generated one."""
    manifest = json.loads((CORPUS.parent / "MANIFEST.json").read_text())
    out = [(CORPUS / name, 2) for name, case in sorted(manifest.items()) if case["expect"]["info"] == 0]
    # The generated set is the only one past the record-by-record limit: draw it as often as all the
    # corpus sets together.
    out += [(generated_set(directory), 8)] * len(out)
    return out


class Fuzzer:
    def __init__(self, args: argparse.Namespace, scratch: Path):
        self.args, self.scratch = args, scratch
        self.rng = random.Random(args.seed)
        self.sets = rank_sets(scratch)
        self.hw = {}
        self.outcomes: Counter[str] = Counter()
        self.mutations: Counter[str] = Counter()
        self.found = 0
        self.cases: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter({k: 0 for k in ("traceback", "hang", "silent-wrong", "bad-error", "memory")})
        self.bases = decoder_bases()
        self.json_bases = [json.dumps(jsonio_doc(b)) for b in self.bases.values()]

    def hardware(self, npus: int):
        from chakra_pipe.sim import load_hardware

        if npus not in self.hw:
            net = self.scratch / f"ring{npus}.yml"
            write_text(net, f"topology: [ Ring ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
            system = self.scratch / "system.json"
            write_text(system, SYSTEM)
            self.hw[npus] = load_hardware(system, net)
        return self.hw[npus]

    def case(self, surface: str) -> None:
        work = self.scratch / "case"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        getattr(self, f"case_{surface}")(work)
        self.cases[surface] += 1

    def case_sets(self, work: Path) -> None:
        src, npus = self.rng.choice(self.sets)
        groups = Path(f"{src}.comm_groups.json")
        if groups.exists():
            shutil.copy(groups, work / "m.comm_groups.json")
        donor_src, donor_npus = self.rng.choice(self.sets)
        donor = Path(f"{donor_src}.{self.rng.randrange(donor_npus)}.et").read_bytes()
        victims = set(self.rng.sample(range(npus), min(npus, self.rng.choice([1, 1, 1, 2]))))
        labels = []
        for r in range(npus):
            data = Path(f"{src}.{r}.et").read_bytes()
            if r in victims:
                for _ in range(self.rng.randint(1, 3)):
                    data, label = mutate(self.rng, data, donor)
                    labels.append(label)
            write_bytes(work / f"m.{r}.et", data)
        self.mutations.update(labels)
        prefix = str(work / "m")
        victim = f"{prefix}.{min(victims)}.et"
        self.check("reader", lambda: self.reader_agrees(victim), work, src, labels)
        self.check("validate", lambda: self.validate(prefix), work, src, labels)
        self.check("simulate", lambda: self.simulate(prefix, npus), work, src, labels)

    # -- decoders --------------------------------------------------------------------------------
    def case_decoders(self, work: Path) -> None:
        name = self.rng.choice(sorted(self.bases))
        data, labels = self.bases[name], []
        gz = self.rng.random() < 0.25
        if gz and self.rng.random() < 0.5:
            data, labels = gzip.compress(mutate_bytes(self.rng, data), mtime=0), ["edit", "gzip"]
        elif gz:
            data, labels = mutate_bytes(self.rng, gzip.compress(data, mtime=0)), ["gzip", "edit"]
        else:
            data, labels = mutate_bytes(self.rng, data), ["edit"]
        path = work / ("m.0.et.gz" if gz else "m.0.et")
        write_bytes(path, data)
        self.mutations.update(labels)
        self.check("decoders", lambda: decoders_agree(path, data), work, name, labels)

    # -- JSON/YAML readers -----------------------------------------------------------------------
    def case_readers(self, work: Path) -> None:
        kind = self.rng.choice(sorted(READER_BASES))
        suffix, text, load = READER_BASES[kind]
        data, labels = hostile_text(self.rng, text, yaml=suffix == ".yml")
        path = work / f"c{suffix}"
        write_bytes(path, data)
        self.mutations.update(labels)
        self.check("readers", lambda: reader_contract(load, path, data, suffix), work, kind, labels)

    # -- dejsonize -------------------------------------------------------------------------------
    def case_dejsonize(self, work: Path) -> None:
        data, labels = hostile_json_trace(self.rng, self.rng.choice(self.json_bases))
        src = work / "t.json"
        write_bytes(src, data)
        self.mutations.update(labels)
        self.check("dejsonize", lambda: dejsonize_contract(src, work / "t.et", data), work, "jsonized base", labels)

    @staticmethod
    def reader_agrees(path: str) -> None:
        """Both readers refuse the file (the strict reader's error propagates) or both read the same."""
        try:
            _, nodes = read_trace(path)
        except TraceFormatError:
            if _graph_accepts(path):
                raise SilentWrong("read_trace refused the file but load_graph accepted it") from None
            raise
        g = load_graph(path)
        if g.ids.tolist() != [n.id for n in nodes] or len(g.data_ids) != sum(len(n.data_deps) for n in nodes):
            raise SilentWrong("load_graph and read_trace disagree on ids or data deps")

    @staticmethod
    def validate(prefix: str) -> str:
        from chakra_pipe.validate.validator import validate_set

        return "findings" if validate_set(prefix).errors else "ok"

    def simulate(self, prefix: str, npus: int) -> None:
        from chakra_pipe.sim import simulate

        simulate(TraceSet.load(prefix), self.hardware(npus))

    def check(self, verb: str, fn, work: Path, src: Path | str, labels: list[str]) -> None:
        signal.signal(signal.SIGALRM, _expire)
        signal.alarm(self.args.timeout)
        problem, kind = None, None
        try:
            self.outcomes[f"{verb}:{fn() or 'ok'}"] += 1
        except ChakraPipeError as exc:
            self.outcomes[f"{verb}:exit{exc.exit_code}"] += 1
            if exc.exit_code not in (1, 2, 3) or not exc.file or "\n" in exc.line():
                problem, kind = f"bad error: exit {exc.exit_code}: {exc.line()!r}", "bad-error"
        except Expired:
            problem, kind = f"still running after {self.args.timeout} s", "hang"
        except SilentWrong as exc:
            problem, kind = f"silent wrong answer: {exc}", "silent-wrong"
        except Exception:  # noqa: BLE001 -- every other exception is the finding we are looking for
            problem, kind = traceback.format_exc(), "traceback"
        finally:
            signal.alarm(0)
        peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20)
        if problem is None and peak_gb > self.args.memory_gb:
            problem, kind = f"peak RSS {peak_gb:.1f} GB exceeds {self.args.memory_gb} GB", "memory"
        if problem:
            self.found += 1
            self.kinds[kind] += 1
            self.outcomes[f"{verb}:FINDING"] += 1
            keep = self.args.out / f"{self.found:04d}-{verb}"
            shutil.copytree(work, keep, dirs_exist_ok=True)
            write_text(keep / "what.txt", f"source: {src}\nmutations: {', '.join(labels)}\n\n{problem}\n")
            print(f"FINDING {keep}: {kind}: {verb}: {problem.strip().splitlines()[-1][:300]}", flush=True)

    def report(self, elapsed: float) -> None:
        total = sum(self.cases.values())
        print(
            f"{total} cases in {elapsed:.0f} s ({total / max(elapsed, 1e-9):.1f} cases/s; "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.cases.items()))
            + f"), {self.found} finding(s)",
            flush=True,
        )
        print("  outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items())), flush=True)

    def summary(self, elapsed: float) -> str:
        return f"SUMMARY {sum(self.cases.values())} cases in {elapsed / 60:.1f} min: " + ", ".join(
            f"{v} {k}" for k, v in self.kinds.items()
        )


SURFACES = ("sets", "decoders", "readers", "dejsonize")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="how long to fuzz (default 10)")
    ap.add_argument("--surface", choices=("all", *SURFACES), default="all", help="what to fuzz (default: all, in turn)")
    ap.add_argument("--seed", type=int, default=1, help="random seed: the same seed replays the same cases")
    ap.add_argument("--timeout", type=int, default=30, help="seconds per verb before a case counts as a hang")
    ap.add_argument("--memory-gb", type=float, default=4.0, help="peak resident memory allowed")
    ap.add_argument(
        "--out",
        type=Path,
        default=REPO / "benchmarks" / "out" / "fuzz-findings",
        help="where failing cases are kept (default: benchmarks/out/fuzz-findings, git-ignored)",
    )
    args = ap.parse_args(argv)
    surfaces = SURFACES if args.surface == "all" else (args.surface,)
    with tempfile.TemporaryDirectory(prefix="chakra-fuzz-") as tmp:
        fuzzer = Fuzzer(args, Path(tmp))
        start = last = time.monotonic()
        end = start + args.minutes * 60
        k = 0
        while time.monotonic() < end:
            fuzzer.case(surfaces[k % len(surfaces)])
            k += 1
            if time.monotonic() - last >= 60:
                fuzzer.report(time.monotonic() - start)
                last = time.monotonic()
        fuzzer.report(time.monotonic() - start)
        print("  mutations: " + ", ".join(f"{k} {v}" for k, v in sorted(fuzzer.mutations.items())))
        print(fuzzer.summary(time.monotonic() - start), flush=True)
    return 1 if fuzzer.found else 0


if __name__ == "__main__":
    sys.exit(main())
