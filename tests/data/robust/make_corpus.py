"""Rebuild the robustness corpus: small broken rank sets and the exit codes the spec implies for them.

Run ``python tests/data/robust/make_corpus.py`` from the repository root; it rewrites ``traces/`` and
``MANIFEST.json`` here deterministically (the test suite checks the committed files match a rebuild, so
the corpus can never drift from this description). Every case is a two-rank set ``traces/NAME.{0,1}.et``
built from one valid base workload (per rank: a 5 µs compute, a 1 MiB all-reduce, a 3 µs compute,
chained by data deps) with exactly one defect. ``expect`` gives the exit code of ``validate``,
``simulate`` and ``info`` on the set, each justified by the cited rule:

* chakra-format.md §9 (validator checklist): framing and decoding failures are unreadable input (2);
  a rule marked (E) is a finding (1).
* astra-sim-semantics.md §2.2/§2.4: a dangling data dep, no dependency-free node, an unsupported
  collective or a COMM node with ``is_cpu_op`` make ASTRA-sim abort: invalid input (2). A trace that
  loads but cannot finish (a cycle behind a root, a receive whose send never comes, a collective one
  member never issues) is 3; a send nobody receives completes on arrival (0, and a validate finding).
* ``info`` reports statistics of any decodable file (0) and refuses undecodable ones (2).

A ``null`` expectation means the spec leaves the outcome open; the test then only requires a clean one.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "src"))

from chakra_pipe.atomic import write_bytes, write_json  # noqa: E402
from chakra_pipe.et import schema  # noqa: E402
from chakra_pipe.et.attrs import set_attr  # noqa: E402
from chakra_pipe.et.framing import encode_varint, frame, scan_records  # noqa: E402

MiB = 1 << 20


def comp(nid: int, deps: list[int], dur: int) -> schema.Node:
    node = schema.Node(id=nid, name=f"comp{nid}", type=schema.COMP_NODE, duration_micros=dur)
    node.data_deps.extend(deps)
    set_attr(node, "is_cpu_op", False)
    set_attr(node, "num_ops", 1000)
    set_attr(node, "tensor_size", 4096)
    return node


def coll(nid: int, deps: list[int], comm_type: int = schema.ALL_REDUCE, size: int = MiB) -> schema.Node:
    node = schema.Node(id=nid, name=f"coll{nid}", type=schema.COMM_COLL_NODE)
    node.data_deps.extend(deps)
    set_attr(node, "is_cpu_op", False)
    set_attr(node, "comm_type", comm_type)
    set_attr(node, "comm_size", size)
    return node


def p2p(nid: int, deps: list[int], kind: int, peer: int, tag: int = 7, size: int = MiB) -> schema.Node:
    node = schema.Node(id=nid, name=f"p2p{nid}", type=kind)
    node.data_deps.extend(deps)
    set_attr(node, "is_cpu_op", False)
    set_attr(node, "comm_dst" if kind == schema.COMM_SEND_NODE else "comm_src", peer)
    set_attr(node, "comm_tag", tag)
    set_attr(node, "comm_size", size)
    return node


def base_nodes() -> list[schema.Node]:
    return [comp(1, [], 5), coll(2, [1]), comp(3, [2], 3)]


def encode(nodes: list[schema.Node]) -> bytes:
    md = schema.GlobalMetadata(version="0.0.4")
    return frame(md.SerializeToString()) + b"".join(frame(n.SerializeToString()) for n in nodes)


def with_attr(node: schema.Node, name: str, value, kind: str) -> schema.Node:
    """``node`` with attribute ``name`` replaced by ``value`` stored as oneof member ``kind``."""
    keep = [a for a in node.attr if a.name != name]
    del node.attr[:]
    node.attr.extend(keep)
    set_attr(node, name, value, kind)
    return node


def record_offsets(data: bytes) -> list[int]:
    """Byte offset of every record's length prefix (framing as chakra-format.md §2)."""
    starts, lengths = scan_records(data)
    return [s - len(encode_varint(n)) for s, n in zip(starts, lengths)]


BASE = encode(base_nodes())
LAST = record_offsets(BASE)[-1]


def _flip_first_node_tag() -> bytes:
    """Node field 1 (id, tag 0x08) becomes field 11 (tag 0x58): an unknown field, §9 rule 4."""
    data = bytearray(BASE)
    first = record_offsets(BASE)[1]
    assert data[first + 1] == 0x08
    data[first + 1] ^= 0x50
    return bytes(data)


# name -> (rank-0 bytes, rank-1 bytes or None for the base, expectations, reason)
Case = tuple[bytes, bytes | None, dict[str, int | None], str]
FRAMING = {"validate": 2, "simulate": 2, "info": 2}


def cases() -> dict[str, Case]:
    n = base_nodes
    out: dict[str, Case] = {
        "valid": (BASE, None, {"validate": 0, "simulate": 0, "info": 0}, "the base workload itself"),
        "truncated_record": (BASE[:LAST + 5], None, FRAMING, "§9.1: last record cut short"),
        "truncated_prefix": (BASE + b"\x80", None, FRAMING, "§9.1: file ends inside a length varint"),
        "huge_length": (BASE + b"\xff\xff\xff\xff\x0f" + b"\x00" * 8, None, FRAMING,
                        "§9.1: a 4 GiB length prefix must be refused, not allocated"),
        "overlong_prefix": (BASE + b"\x80\x80\x80\x80\x80\x01", None, FRAMING, "§9.1: length varint over 5 bytes"),
        "zero_length_record": (BASE + b"\x00", None, FRAMING, "§9.2: zero-length node record"),
        "unknown_field": (_flip_first_node_tag(), None, FRAMING, "§9.4: bit flip turns a tag into an unknown field"),
        "empty_file": (b"", None, FRAMING, "§9.3: no GlobalMetadata record"),
        "json_text": (b'{"nodes": []}\n', None, FRAMING, "§9.3: not a Chakra trace"),
        "bad_gzip": (b"\x1f\x8b\x08\x00" + b"\xde\xad\xbe\xef" * 8, None, FRAMING, "corrupt gzip stream"),
        "duplicate_id": (encode([comp(1, [], 5), comp(1, [], 2), coll(2, [1]), comp(3, [2], 3)]), None,
                         {"validate": 1, "simulate": None, "info": 0}, "§9.6: node ids unique"),
        "dangling_data_dep": (encode([comp(1, [], 5), coll(2, [1, 99]), comp(3, [2], 3)]), None,
                              {"validate": 1, "simulate": 2, "info": 0},
                              "§9.8 / semantics §2.2: a dep on a missing id fails loading"),
        "self_dep": (encode([comp(1, [1], 5), coll(2, [1]), comp(3, [2], 3)]), None,
                     {"validate": 1, "simulate": 2, "info": 0},
                     "§9.10/§9.12 / semantics §2.2: no dependency-free node, ASTRA-sim aborts"),
        "cycle": (encode([comp(1, [], 5), coll(2, [1]), comp(3, [2, 5], 3), comp(4, [3], 1), comp(5, [4], 1)]),
                  None, {"validate": 1, "simulate": 3, "info": 0},
                  "§9.11: nodes 3-4-5 form a cycle behind a root; they can never issue"),
        "node_type_out_of_range": (encode([comp(1, [], 5), coll(2, [1]), schema.Node(id=3, name="x", type=42,
                                                                                     data_deps=[2])]),
                                   None, {"validate": 1, "simulate": None, "info": 0}, "§9.7: type within 0..7"),
        "comm_type_out_of_range": (encode([comp(1, [], 5), coll(2, [1], comm_type=99), comp(3, [2], 3)]), None,
                                   {"validate": 1, "simulate": 2, "info": 0}, "§9.15: comm_type in 0..9"),
        "negative_comm_size": (encode([comp(1, [], 5), with_attr(coll(2, [1]), "comm_size", -5, "int64_val"),
                                       comp(3, [2], 3)]), None,
                               {"validate": 1, "simulate": 2, "info": 0}, "§9.15: comm_size >= 0 (invalid input, not a deadlock)"),
        "comm_size_as_string": (encode([comp(1, [], 5), with_attr(coll(2, [1]), "comm_size", "1048576", "string_val"),
                                        comp(3, [2], 3)]), None,
                                {"validate": 1, "simulate": 2, "info": 0},
                                "§9.14/§9.15: comm_size is not an integer (invalid input, not a deadlock)"),
        "involved_dim_as_int": (encode([comp(1, [], 5), with_attr(coll(2, [1]), "involved_dim", 1, "int64_val"),
                                        comp(3, [2], 3)]), None,
                                {"validate": 1, "simulate": None, "info": 0}, "§9.21: involved_dim is a bool_list"),
        "barrier": (encode([comp(1, [], 5), coll(2, [1], comm_type=schema.BARRIER), comp(3, [2], 3)]),
                    encode([comp(1, [], 5), coll(2, [1], comm_type=schema.BARRIER), comp(3, [2], 3)]),
                    {"validate": 0, "simulate": 2, "info": 0},
                    "§9.16 (W) / semantics §2.4: BARRIER is an 'Unsupported collective comm type' error"),
        "comm_on_cpu": (encode([comp(1, [], 5), with_attr(coll(2, [1]), "is_cpu_op", True, "bool_val"),
                                comp(3, [2], 3)]), None,
                        {"validate": 1, "simulate": 2, "info": 0}, "§9.18 / semantics §2.4: ASTRA-sim throws"),
        "missing_collective": (encode([comp(1, [], 5), comp(3, [1], 3)]), None,
                               {"validate": 1, "simulate": 3, "info": 0},
                               "§9.24: rank 1 issues an all-reduce rank 0 never joins"),
        "unmatched_send": (encode(n() + [p2p(4, [3], schema.COMM_SEND_NODE, peer=1)]), None,
                           {"validate": 1, "simulate": 0, "info": 0},
                           "§9.25 / semantics §2.4: rank 1 never posts the recv; a send completes on arrival"),
        "unmatched_recv": (encode(n() + [p2p(4, [3], schema.COMM_RECV_NODE, peer=1)]), None,
                           {"validate": 1, "simulate": 3, "info": 0},
                           "§9.25: rank 0 waits for a message rank 1 never sends"),
        "p2p_cross_wait": (encode([comp(1, [], 5), p2p(2, [1], schema.COMM_RECV_NODE, peer=1),
                                   p2p(3, [2], schema.COMM_SEND_NODE, peer=1)]),
                           encode([comp(1, [], 5), p2p(2, [1], schema.COMM_RECV_NODE, peer=0),
                                   p2p(3, [2], schema.COMM_SEND_NODE, peer=0)]),
                           {"validate": None, "simulate": 3, "info": 0},
                           "both ranks receive before they send: every send has its recv (§9.25), yet neither "
                           "rank can proceed"),
        "pg_mismatch": (encode([comp(1, [], 5), with_attr(coll(2, [1]), "pg_name", "1", "string_val"), comp(3, [2], 3)]),
                        encode([comp(1, [], 5), with_attr(coll(2, [1]), "pg_name", "2", "string_val"), comp(3, [2], 3)]),
                        {"validate": 1, "simulate": 3, "info": 0},
                        "§9.24: the ranks issue their all-reduce in different process groups (1 and 2, both "
                        "{0, 1} in PREFIX.comm_groups.json)"),
        "mismatched_tag": (encode(n() + [p2p(4, [3], schema.COMM_SEND_NODE, peer=1, tag=7)]),
                           encode(n() + [p2p(4, [3], schema.COMM_RECV_NODE, peer=0, tag=8)]),
                           {"validate": 1, "simulate": 3, "info": 0},
                           "§9.25: send and recv tags differ, neither completes"),
    }
    return out


# ASTRA-sim communicator-group files (``{"id": [npus]}``) of the cases that use process groups.
GROUPS = {"pg_mismatch": {"1": [0, 1], "2": [0, 1]}}


def build(directory: Path = HERE) -> dict[str, dict]:
    manifest: dict[str, dict] = {}
    for name, (rank0, rank1, expect, reason) in cases().items():
        write_bytes(directory / "traces" / f"{name}.0.et", rank0)
        write_bytes(directory / "traces" / f"{name}.1.et", BASE if rank1 is None else rank1)
        if name in GROUPS:
            write_json(directory / "traces" / f"{name}.comm_groups.json", GROUPS[name])
        manifest[name] = {"expect": expect, "reason": reason}
    write_json(directory / "MANIFEST.json", manifest)
    return manifest


if __name__ == "__main__":
    build()
    print(f"wrote {len(cases())} cases to {HERE / 'traces'}")
