"""``TraceGraph``: one rank's trace as numpy columns, decoded without a Python object per node.

Every later stage (validate, simulate, report) wants the same few columns — ids, types, durations,
a handful of attributes and the two dependency lists — for traces of up to millions of nodes. The
bulk loader walks the protobuf wire format with vectorised numpy steps over *all* records at once
(one step per field, not per node), decodes the packed dependency varints in one pass, and keeps
the raw bytes so any full ``Node`` can still be decoded on demand. Records that stray from the
layout Chakra writers produce (fields repeated or out of place, unpacked repeats) fall back to the
protobuf runtime, so the result is always the protobuf reading of the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..errors import TraceFormatError
from . import attrs as _attrs
from . import schema
from .framing import parse_metadata, parse_node, read_bytes, scan_records

# Integer-valued attributes kept as columns: value (int64) + kind (oneof field number, 0 = absent).
INT_ATTRS = ("is_cpu_op", "num_ops", "tensor_size", "tensor_loc", "comm_type", "comm_size",
             "comm_src", "comm_dst", "comm_tag", "comm_priority")
STR_ATTRS = ("pg_name",)
LIST_ATTRS = ("involved_dim",)
_KNOWN = INT_ATTRS + STR_ATTRS + LIST_ATTRS
_PAD = 16  # bytes of zero padding after the buffer so vectorised reads never go out of range
_VECTOR_STEPS = 64  # field steps walked in bulk; nodes with more fields finish one by one

_U64 = np.uint64


def _key(name: bytes) -> tuple[int, int, int]:
    padded = name.ljust(16, b"\0")
    return len(name), int.from_bytes(padded[:8], "little"), int.from_bytes(padded[8:], "little")


_KNOWN_KEYS = {_key(n.encode()): i for i, n in enumerate(_KNOWN)}


@dataclass
class TraceGraph:
    """Columns of one ``.et`` file. Index ``i`` is the i-th node record in file order."""

    path: str
    metadata: object
    buf: bytes = field(repr=False)
    rec_start: np.ndarray = field(repr=False)
    rec_len: np.ndarray = field(repr=False)
    ids: np.ndarray
    types: np.ndarray
    duration_micros: np.ndarray
    start_time_micros: np.ndarray
    name_start: np.ndarray = field(repr=False)
    name_len: np.ndarray = field(repr=False)
    ctrl_ptr: np.ndarray = field(repr=False)
    ctrl_ids: np.ndarray = field(repr=False)
    data_ptr: np.ndarray = field(repr=False)
    data_ids: np.ndarray = field(repr=False)
    attr_value: dict[str, np.ndarray] = field(repr=False)
    attr_kind: dict[str, np.ndarray] = field(repr=False)
    pg_name: dict[int, str] = field(repr=False)
    involved_dim: dict[int, list[bool]] = field(repr=False)
    _order: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    # -- per-node access -------------------------------------------------------------------
    def name(self, i: int) -> str:
        s = int(self.name_start[i])
        return self.buf[s:s + int(self.name_len[i])].decode("utf-8", "replace")

    def node(self, i: int):
        """The full protobuf ``Node`` of record ``i`` (decoded on demand)."""
        s = int(self.rec_start[i])
        return parse_node(self.buf[s:s + int(self.rec_len[i])], self.path, s)

    def nodes(self):
        for i in range(len(self)):
            yield self.node(i)

    def has(self, name: str) -> np.ndarray:
        return self.attr_kind[name] != 0

    def int_attr(self, name: str, default: int = 0) -> np.ndarray:
        """Column of an integer attribute, ``default`` where absent or not an integer kind."""
        kind = self.attr_kind[name]
        ok = np.isin(kind, _INT_KIND_NUMBERS)
        return np.where(ok, self.attr_value[name], default)

    @property
    def is_cpu_op(self) -> np.ndarray:
        return self.int_attr("is_cpu_op", 0) != 0

    # -- dependencies ----------------------------------------------------------------------
    def data_deps(self, i: int) -> np.ndarray:
        return self.data_ids[self.data_ptr[i]:self.data_ptr[i + 1]]

    def ctrl_deps(self, i: int) -> np.ndarray:
        return self.ctrl_ids[self.ctrl_ptr[i]:self.ctrl_ptr[i + 1]]

    def index_of(self, ids: np.ndarray | int) -> np.ndarray:
        """Record index of each id (-1 where the id is not in the file); first record wins."""
        if self._order is None:
            self._order = np.argsort(self.ids, kind="stable")
        order = self._order
        sorted_ids = self.ids[order]
        q = np.asarray(ids, dtype=_U64)
        pos = np.searchsorted(sorted_ids, q)
        pos_c = np.minimum(pos, max(len(order) - 1, 0))
        if len(order) == 0:
            return np.full(q.shape, -1, dtype=np.int64)
        found = sorted_ids[pos_c] == q
        return np.where(found, order[pos_c], -1).astype(np.int64)

    def dep_indices(self, which: str = "data") -> tuple[np.ndarray, np.ndarray]:
        """CSR ``(ptr, parent_index)`` of one dependency list; -1 marks a dangling id."""
        ptr, ids = (self.data_ptr, self.data_ids) if which == "data" else (self.ctrl_ptr, self.ctrl_ids)
        return ptr, self.index_of(ids)


_INT_KIND_NUMBERS = np.array([_attrs.KIND_NUMBER[k] for k in _attrs.INT_KINDS], dtype=np.uint8)


def load_graph(path: str | os.PathLike) -> TraceGraph:
    """Bulk-load one ``.et`` (or ``.et.gz``) file into a :class:`TraceGraph`."""
    path = str(path)
    return graph_from_bytes(read_bytes(path), path)


def graph_from_bytes(buf: bytes, path: str = "<bytes>") -> TraceGraph:
    starts, lengths = scan_records(buf, path)
    metadata = parse_metadata(buf[starts[0]:starts[0] + lengths[0]], path, 0)
    rec_start = np.array(starts[1:], dtype=np.int64)
    rec_len = np.array(lengths[1:], dtype=np.int64)
    arr = np.frombuffer(buf + bytes(_PAD), dtype=np.uint8)
    return _Decoder(buf, arr, path, metadata, rec_start, rec_len).run()


def _varints(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one varint at each position: (value as uint64, byte count; 0 if over 10 bytes)."""
    b = arr[pos]
    val = (b & 0x7F).astype(_U64)
    nbytes = np.ones(len(pos), dtype=np.int64)
    more = np.nonzero(b >= 0x80)[0]
    for k in range(1, 10):
        if not len(more):
            break
        bk = arr[pos[more] + k]
        val[more] |= (bk & 0x7F).astype(_U64) << _U64(7 * k)
        nbytes[more] += 1
        more = more[bk >= 0x80]
    nbytes[more] = 0
    return val, nbytes


def _packed_varints(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode packed varint regions: (values, count per region, ok-mask per region)."""
    total = int(lens.sum())
    counts = np.zeros(len(starts), dtype=np.int64)
    ok = np.ones(len(starts), dtype=bool)
    if total == 0:
        return np.zeros(0, dtype=_U64), counts, ok
    offs = np.cumsum(lens) - lens
    idx = np.repeat(starts - offs, lens) + np.arange(total, dtype=np.int64)
    b = arr[idx]
    term = b < 0x80
    nz = lens > 0
    last = (offs + lens - 1)[nz]
    ok[nz] = term[last]  # every region must end exactly on a varint boundary
    cs = np.cumsum(term)
    region_end = cs[offs + lens - 1]
    region_before = np.where(offs > 0, cs[np.maximum(offs - 1, 0)], 0)
    counts = np.where(nz, region_end - region_before, 0).astype(np.int64)
    ends = np.nonzero(term)[0]
    vstarts = np.empty(len(ends), dtype=np.int64)
    vstarts[0] = 0
    vstarts[1:] = ends[:-1] + 1
    vlen = ends - vstarts + 1
    if len(vlen) and vlen.max() > 10:
        bad_byte = vstarts[vlen > 10]
        region = np.searchsorted(offs, bad_byte, side="right") - 1
        ok[region] = False
    k = np.arange(total, dtype=np.int64) - np.repeat(vstarts, vlen)
    contrib = (b[: ends[-1] + 1] & 0x7F).astype(_U64) << (7 * np.minimum(k, 9)).astype(_U64)
    values = np.add.reduceat(contrib, vstarts) if len(vstarts) else np.zeros(0, dtype=_U64)
    return values, counts, ok


class _Decoder:
    """One bulk decode of a node-record table (see module docstring)."""

    def __init__(self, buf, arr, path, metadata, rec_start, rec_len):
        self.buf, self.arr, self.path, self.metadata = buf, arr, path, metadata
        self.rec_start, self.rec_len = rec_start, rec_len
        n = len(rec_start)
        self.n = n
        self.ids = np.zeros(n, dtype=_U64)
        self.types = np.zeros(n, dtype=np.int64)
        self.dur = np.zeros(n, dtype=_U64)
        self.start = np.zeros(n, dtype=_U64)
        self.name_start = np.zeros(n, dtype=np.int64)
        self.name_len = np.zeros(n, dtype=np.int64)
        self.dep_span = {f: (np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)) for f in (4, 5)}
        self.slow = np.zeros(n, dtype=bool)
        self.attr_node: list[np.ndarray] = []
        self.attr_s: list[np.ndarray] = []
        self.attr_l: list[np.ndarray] = []

    def run(self) -> TraceGraph:
        self._walk_nodes()
        attr_value, attr_kind, pg_name, involved = self._walk_attrs()
        deps = {f: self._deps(f) for f in (4, 5)}
        slow = np.nonzero(self.slow)[0]
        if len(slow):
            deps = self._finish_slow(slow, attr_value, attr_kind, pg_name, involved, deps)
        else:
            deps = {f: (_ptr(counts), values) for f, (counts, values) in deps.items()}
        return TraceGraph(
            path=self.path, metadata=self.metadata, buf=self.buf, rec_start=self.rec_start,
            rec_len=self.rec_len, ids=self.ids, types=np.clip(self.types, -1, 127).astype(np.int8),
            duration_micros=self.dur, start_time_micros=self.start, name_start=self.name_start,
            name_len=self.name_len, ctrl_ptr=deps[4][0], ctrl_ids=deps[4][1], data_ptr=deps[5][0],
            data_ids=deps[5][1], attr_value=attr_value, attr_kind=attr_kind, pg_name=pg_name,
            involved_dim=involved)

    # -- node fields -----------------------------------------------------------------------
    def _walk_nodes(self) -> None:
        arr = self.arr
        p = self.rec_start.copy()
        end = self.rec_start + self.rec_len
        seen = np.zeros(self.n, dtype=np.int64)
        active = np.nonzero(p < end)[0]
        steps = 0
        while len(active):
            if steps >= _VECTOR_STEPS:
                self.slow[active] = True
                break
            steps += 1
            pa = p[active]
            tag = arr[pa].astype(np.int64)
            fnum, wt = tag >> 3, tag & 7
            bit = np.left_shift(1, np.minimum(fnum, 62))
            valid = ((tag < 0x80) & (fnum >= 1) & (fnum <= 10)
                     & np.where(np.isin(fnum, (1, 3, 6, 7)), wt == 0, wt == 2)
                     & ((fnum == 10) | ((seen[active] & bit) == 0)))
            val, nb = _varints(arr, pa + 1)
            valid &= nb > 0
            is_len = wt == 2
            newp = pa + 1 + nb + np.where(is_len, val.astype(np.int64), 0)
            valid &= (newp <= end[active]) & (~is_len | (val < _U64(1 << 40)))
            bad = active[~valid]
            self.slow[bad] = True
            keep = valid
            a, f, v, s = active[keep], fnum[keep], val[keep], (pa + 1 + nb)[keep]
            seen[a] |= bit[keep]
            for num, col in ((1, self.ids), (6, self.start), (7, self.dur)):
                m = f == num
                col[a[m]] = v[m]
            m = f == 3
            self.types[a[m]] = v[m].astype(np.int64)
            m = f == 2
            self.name_start[a[m]] = s[m]
            self.name_len[a[m]] = v[m].astype(np.int64)
            for num in (4, 5):
                m = f == num
                self.dep_span[num][0][a[m]] = s[m]
                self.dep_span[num][1][a[m]] = v[m].astype(np.int64)
            m = f == 10
            if m.any():
                self.attr_node.append(a[m])
                self.attr_s.append(s[m])
                self.attr_l.append(v[m].astype(np.int64))
            p[a] = newp[keep]
            active = a[p[a] < end[a]]

    # -- attributes ------------------------------------------------------------------------
    def _walk_attrs(self):
        n = self.n
        attr_value = {k: np.zeros(n, dtype=np.int64) for k in INT_ATTRS}
        attr_kind = {k: np.zeros(n, dtype=np.uint8) for k in _KNOWN}
        pg_name: dict[int, str] = {}
        involved: dict[int, list[bool]] = {}
        if not self.attr_node:
            return attr_value, attr_kind, pg_name, involved
        node = np.concatenate(self.attr_node)
        s = np.concatenate(self.attr_s)
        end = s + np.concatenate(self.attr_l)
        # Keep file order of attributes within a node so a repeated name reads last-wins.
        order = np.lexsort((s, node))
        node, s, end = node[order], s[order], end[order]
        m = len(node)
        arr = self.arr
        name_s = np.zeros(m, dtype=np.int64)
        name_l = np.zeros(m, dtype=np.int64)
        kind = np.zeros(m, dtype=np.int64)
        raw = np.zeros(m, dtype=_U64)
        span_s = np.zeros(m, dtype=np.int64)
        span_l = np.zeros(m, dtype=np.int64)
        bad = np.zeros(m, dtype=bool)
        p = s.copy()
        active = np.nonzero(p < end)[0]
        steps = 0
        while len(active):
            steps += 1
            if steps > 8:  # name, doc_string, one value: anything longer is unusual
                bad[active] = True
                break
            pa = p[active]
            tag, tb = _varints(arr, pa)
            fnum = (tag >> _U64(3)).astype(np.int64)
            wt = (tag & _U64(7)).astype(np.int64)
            ok = (tb > 0) & (tb <= 2) & (fnum >= 1) & (fnum <= 32)
            expected_wt = np.where(fnum <= 2, 2, np.where(fnum % 2 == 0, 2, _SCALAR_WT[np.minimum(fnum, 32)]))
            ok &= wt == expected_wt
            q = pa + tb
            val, nb = _varints(arr, q)
            fixed8 = wt == 1
            fixed4 = wt == 5
            is_len = wt == 2
            newp = np.where(fixed8, q + 8, np.where(fixed4, q + 4, q + nb + np.where(is_len, val.astype(np.int64), 0)))
            ok &= ((nb > 0) | fixed8 | fixed4) & (newp <= end[active]) & (~is_len | (val < _U64(1 << 40)))
            bad[active[~ok]] = True
            a = active[ok]
            f, v, qq, nbk = fnum[ok], val[ok], q[ok], nb[ok]
            w = wt[ok]
            mname = f == 1
            name_s[a[mname]] = (qq + nbk)[mname]
            name_l[a[mname]] = v[mname].astype(np.int64)
            mval = f >= 3
            av = a[mval]
            kind[av] = f[mval]
            fv, vv, qv, nbv, wv = f[mval], v[mval], qq[mval], nbk[mval], w[mval]
            raw[av] = np.where(wv == 0, vv, _fixed(arr, qv, np.where(wv == 1, 8, 4)))
            span_s[av] = qv + nbv
            span_l[av] = np.where(wv == 2, vv.astype(np.int64), 0)
            p[a] = newp[ok]
            active = a[p[a] < end[a]]
        if bad.any():
            self.slow[np.unique(node[bad])] = True
        good = ~bad & ~self.slow[node]
        # Identify well-known names by (length, 16 padded bytes).
        short = good & (name_l <= 16) & (name_l > 0)
        idx = np.nonzero(short)[0]
        code = np.full(m, -1, dtype=np.int64)
        if len(idx):
            grab = arr[name_s[idx, None] + np.arange(16)]
            grab = np.where(np.arange(16)[None, :] < name_l[idx, None], grab, 0).astype(np.uint8)
            words = np.ascontiguousarray(grab).view("<u8")
            for key, i in _KNOWN_KEYS.items():
                hit = (name_l[idx] == key[0]) & (words[:, 0] == _U64(key[1])) & (words[:, 1] == _U64(key[2]))
                code[idx[hit]] = i
        for i, name in enumerate(_KNOWN):
            sel = np.nonzero(code == i)[0]
            if not len(sel):
                continue
            nodes_sel = node[sel]
            attr_kind[name][nodes_sel] = kind[sel].astype(np.uint8)
            if name in INT_ATTRS:
                attr_value[name][nodes_sel] = _int_value(kind[sel], raw[sel])
            elif name == "pg_name":
                for j in sel:
                    if kind[j] == 29:
                        pg_name[int(node[j])] = self.buf[span_s[j]:span_s[j] + span_l[j]].decode("utf-8", "replace")
                    else:
                        pg_name.pop(int(node[j]), None)
            else:
                for j in sel:
                    if kind[j] == 28:
                        involved[int(node[j])] = _bool_list(self.buf[span_s[j]:span_s[j] + span_l[j]])
        return attr_value, attr_kind, pg_name, involved

    # -- dependencies ----------------------------------------------------------------------
    def _deps(self, fnum: int) -> tuple[np.ndarray, np.ndarray]:
        """(count per node, values of fast nodes in node order); bad regions turn their node slow."""
        s, l = self.dep_span[fnum]
        values, counts, ok = _packed_varints(self.arr, s, np.where(self.slow, 0, l))
        if not ok.all():
            self.slow[~ok] = True
            values, counts, ok = _packed_varints(self.arr, s, np.where(self.slow, 0, l))
        return counts, values

    def _finish_slow(self, slow, attr_value, attr_kind, pg_name, involved, deps):
        """Decode the unusual records with the protobuf runtime and splice them in."""
        lists: dict[int, dict[int, list[int]]] = {4: {}, 5: {}}
        for i in map(int, slow):
            node = self.node_message(i)
            self.ids[i], self.types[i] = node.id, node.type
            self.dur[i], self.start[i] = node.duration_micros, node.start_time_micros
            self._name_span(i, node)
            for name in _KNOWN:
                attr_kind[name][i] = 0
            pg_name.pop(i, None)
            involved.pop(i, None)
            for attr in node.attr:
                if attr.name not in attr_kind:
                    continue
                kname = attr.WhichOneof("value")
                attr_kind[attr.name][i] = _attrs.KIND_NUMBER[kname] if kname else 0
                if attr.name in attr_value:
                    attr_value[attr.name][i] = int(getattr(attr, kname)) if kname in _attrs.INT_KINDS else 0
                elif attr.name == "pg_name" and kname == "string_val":
                    pg_name[i] = attr.string_val
                elif attr.name == "involved_dim" and kname == "bool_list":
                    involved[i] = list(attr.bool_list.values)
            lists[4][i] = list(node.ctrl_deps)
            lists[5][i] = list(node.data_deps)
        out = {}
        for fnum in (4, 5):
            fast_counts, fast_vals = deps[fnum]
            counts = fast_counts.copy()
            for i, lst in lists[fnum].items():
                counts[i] = len(lst)
            ptr = _ptr(counts)
            ids = np.zeros(int(ptr[-1]), dtype=_U64)
            fast = np.nonzero(fast_counts)[0]
            if len(fast):
                fc = fast_counts[fast]
                rel = np.arange(int(fc.sum())) - np.repeat(np.cumsum(fc) - fc, fc)
                ids[np.repeat(ptr[fast], fc) + rel] = fast_vals
            for i, lst in lists[fnum].items():
                ids[ptr[i]:ptr[i + 1]] = lst
            out[fnum] = (ptr, ids)
        return out

    def node_message(self, i: int):
        s = int(self.rec_start[i])
        return parse_node(self.buf[s:s + int(self.rec_len[i])], self.path, s)

    def _name_span(self, i: int, node) -> None:
        """Locate the name bytes of a slow node inside the buffer (names are kept as spans)."""
        raw = node.name.encode("utf-8")
        s = int(self.rec_start[i])
        pos = self.buf.find(raw, s, s + int(self.rec_len[i])) if raw else s
        self.name_start[i], self.name_len[i] = max(pos, s), len(raw)


def _ptr(counts: np.ndarray) -> np.ndarray:
    ptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr


# Wire type of each scalar oneof member of AttributeProto, indexed by field number.
_SCALAR_WT = np.zeros(33, dtype=np.int64)
for _num, _wt in {3: 1, 5: 5, 7: 0, 9: 0, 11: 0, 13: 0, 15: 0, 17: 0, 19: 5, 21: 1, 23: 5, 25: 1,
                  27: 0, 29: 2, 31: 2}.items():
    _SCALAR_WT[_num] = _wt


def _fixed(arr: np.ndarray, pos: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Little-endian unsigned integer of ``width`` (4 or 8) bytes at each position."""
    grab = arr[pos[:, None] + np.arange(8)].astype(_U64)
    grab = np.where(np.arange(8)[None, :] < width[:, None], grab, _U64(0))
    return (grab << (_U64(8) * np.arange(8, dtype=_U64))[None, :]).sum(axis=1, dtype=_U64)


def _int_value(kind: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """Interpret raw wire values as int64 according to the oneof member (lenient integer read)."""
    low = (raw & _U64(0xFFFFFFFF)).astype(np.int64)
    s32 = np.where(low >= 1 << 31, low - (1 << 32), low)
    zig = ((raw >> _U64(1)) ^ (_U64(0) - (raw & _U64(1)))).view(np.int64)
    zig32 = (low >> 1) ^ -(low & 1)
    as64 = raw.view(np.int64)
    out = np.zeros(len(kind), dtype=np.int64)
    for nums, values in (((7, 23), s32), ((9, 13, 21, 25), as64), ((11, 19), low),
                         ((15,), zig32), ((17,), zig), ((27,), (raw != 0).astype(np.int64))):
        m = np.isin(kind, nums)
        out[m] = values[m]
    return out


def _bool_list(payload: bytes) -> list[bool]:
    return list(schema.CLASSES["BoolList"].FromString(payload).values)
