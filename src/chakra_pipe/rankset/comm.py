"""What every communication node asks for: its comm spec, resolved once against the group table.

The per-node problems (missing or non-integer attributes, CPU-side communication, a collective ASTRA-
sim cannot chunk) are the ``comm-node`` rule of :mod:`.file_rules`; this module turns the nodes that
passed into :class:`CommSpecs` — one rank's specs as columns, a :class:`CommSpec` built only for the
node a caller asks about — which the cross-rank matching, the finish proof and the replay plan read.
One key per point-to-point channel, ``(src, dst, tag)``, is used everywhere: messages on a channel
pair up in issue order, and a pair whose sizes differ is a mismatch on that channel.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TypeVar

import numpy as np

from ..et import schema
from ..et.attrs import INT_KINDS, KIND_NUMBER
from ..et.graph import TraceGraph
from ..et.traceset import WORLD_PG_NAMES
from .twins import SameInputs

KIND_COLL, KIND_SEND, KIND_RECV = "coll", "send", "recv"
KINDS = (KIND_COLL, KIND_SEND, KIND_RECV)  # by the kind codes of CommSpecs.kind
COLL, SEND, RECV = range(len(KINDS))  # the kind codes
NO_GROUP = -2  # group code of a collective whose pg_name names no group (it gets no spec)
WORLD = ""  # canonical name of the default group ("" and "0" both select it, §2.5)
_T = TypeVar("_T")

INT_NUMBERS = frozenset(KIND_NUMBER[k] for k in INT_KINDS)
INT_KIND = np.zeros(256, dtype=bool)  # by oneof field number: one of the integer kinds (TraceGraph.has_int's)
INT_KIND[list(INT_NUMBERS)] = True

# Attributes a communication node needs, by node type (chakra-format.md §9 items 15 and 17).
COMM_REQUIRED = {
    schema.COMM_COLL_NODE: ("comm_type", "comm_size"),
    schema.COMM_SEND_NODE: ("comm_dst", "comm_tag", "comm_size"),
    schema.COMM_RECV_NODE: ("comm_src", "comm_tag", "comm_size"),
}


# What std::stoi reads (base 10): C-locale white space, an optional sign, then ASCII digits; the rest
# of the text is ignored. A pg_name it cannot read at all makes ASTRA-sim throw (a crash).
_STOI = re.compile(r"[ \t\n\v\f\r]*([-+]?)0*([0-9]+)")
INT_MAX = 2**31 - 1  # std::stoi throws std::out_of_range past the range of int
_PAST_INT = 10**11  # what a number of more than 10 significant digits reads as (already out of range)


def pg_number(pg_name: str) -> int | None:
    """The number ASTRA-sim's ``std::stoi`` reads from ``pg_name``, None when it reads none.

    ``"03"``, ``" 3"``, ``"+3"`` and ``"3abc"`` all read 3: its workload layer keys every
    communicator group (comm-group file ids and METADATA ``pg_name`` s alike) by that int. A number
    of more than 10 significant digits reads as ±10^11 — out of int range either way, and a name of
    thousands of digits never reaches ``int()`` (which refuses over 4,300 digits)."""
    m = _STOI.match(pg_name)
    if m is None:
        return None
    digits = m.group(2)
    value = _PAST_INT if len(digits) > 10 else int(digits)
    return -value if m.group(1) == "-" else value


@lru_cache(maxsize=4096)
def canonical_group(pg_name: str) -> str:
    """The group-table key a ``pg_name`` selects — the one rule of validate, simulate (both engines),
    replay and transform, so a name one stage accepts no other refuses.

    ``""`` and ``"0"`` (as written: ASTRA-sim compares the text first) are the world group. A name
    ``std::stoi`` reads as a group id ASTRA-sim can have, 1..2^31-1, selects that id's group, keyed
    ``str(id)`` as the comm-group file's groups and METADATA groups are (``"03"`` is group 3). Any
    other name is kept as written and so selects no group: text (ASTRA-sim's ``stoi`` throws), a
    number out of int range (``stoi`` throws), a negative one (no group id is negative) — refused with
    :func:`pg_name_hint`'s reason. Spellings of 0 other than ``"0"`` (``"00"``, ``"+0"``) read group 0
    upstream, which only a METADATA group ``"0"``/``"00"`` creates; they too match as written."""
    if pg_name in WORLD_PG_NAMES:
        return WORLD
    number = pg_number(pg_name)
    return str(number) if number is not None and 0 < number <= INT_MAX else pg_name


def pg_name_hint(pg_name: str) -> str:
    """Why ASTRA-sim could not run a collective on ``pg_name`` where no group has that key ("" when
    the name is a plain unknown group id): its ``std::stoi`` throws, or the id is one no group has."""
    number = pg_number(pg_name)
    if number is None:
        return "; ASTRA-sim reads pg_name with std::stoi, which finds no number in it and throws"
    if number > INT_MAX or number < -INT_MAX - 1:
        return "; ASTRA-sim reads pg_name with std::stoi: the number is out of int range and it throws"
    if number < 0:
        return f"; ASTRA-sim reads pg_name with std::stoi as group id {number}, and no group id is negative"
    if number == 0:
        return '; ASTRA-sim reads pg_name with std::stoi as group id 0, not the default group (only "" and "0" are)'
    return ""


def lookup_group(table: Mapping[str, _T], pg_name: str) -> _T | None:
    """``table``'s entry (keyed by :func:`canonical_group` names) for the group ``pg_name`` selects;
    a name as written is tried first, so the common case costs one dict lookup."""
    hit = table.get(pg_name)
    return hit if hit is not None else table.get(canonical_group(pg_name))


@dataclass(frozen=True)
class CommSpec:
    """One communication call of one rank.

    ``nbytes`` is the recorded ``comm_size``; ``group`` the canonical group name and ``members`` its
    global ranks in listed order (collectives); ``channel`` is ``(src, dst, tag)`` (p2p).
    """

    kind: str
    comm_type: int = -1
    nbytes: int = 0
    group: str = WORLD
    members: tuple[int, ...] = ()
    channel: tuple[int, int, int] = (-1, -1, 0)

    @property
    def peer(self) -> int:
        """The other end of a send or receive."""
        return self.channel[1] if self.kind == KIND_SEND else self.channel[0]

    @property
    def tag(self) -> int:
        return self.channel[2]

    def describe(self) -> str:
        if self.kind == KIND_COLL:
            name = schema.COMM_TYPE_NAMES.get(self.comm_type, f"comm_type {self.comm_type}")
            return f"{name} of {self.nbytes} B"
        return f"{self.kind} of {self.nbytes} B (tag {self.tag})"


class CommSpecs(Mapping[int, CommSpec]):
    """The comm specs of one rank as columns, one entry per record with a spec (``index``, ascending).

    A 96-layer LLM step at 1,024 ranks has ~500k communication records: a frozen dataclass each was
    a third of the rank-set analysis and ~100 MB. The cross-rank rules and the proof read the columns
    (``kind``: 0 collective, 1 send, 2 receive, ``group``: index into ``names``, -1 for p2p); a
    caller that wants one record's :class:`CommSpec` (replay's plan, a finding's text) gets it built
    on demand, as the dict this replaced held it.
    """

    def __init__(
        self,
        index: np.ndarray,
        kind: np.ndarray,
        comm_type: np.ndarray,
        nbytes: np.ndarray,
        group: np.ndarray,
        channel: np.ndarray,
        names: tuple[str, ...],
        members: tuple[tuple[int, ...], ...],
        pos: np.ndarray,
    ) -> None:
        self.index, self.kind, self.comm_type, self.nbytes = index, kind, comm_type, nbytes
        self.group, self.channel, self.names, self.members = group, channel, names, members
        self.pos = pos  # record -> row (-1: no spec)

    def __len__(self) -> int:
        return len(self.index)

    def __iter__(self) -> Iterator[int]:
        return iter(self.index.tolist())

    def __contains__(self, i: object) -> bool:
        if not isinstance(i, (int, np.integer)) or not 0 <= i < len(self.pos):
            return False
        return bool(self.pos[i] >= 0)

    def __getitem__(self, i: int) -> CommSpec:
        if i not in self:
            raise KeyError(i)
        return self.spec_at(int(self.pos[i]))

    def spec_at(self, row: int) -> CommSpec:
        kind = KINDS[int(self.kind[row])]
        if kind == KIND_COLL:
            g = int(self.group[row])
            return CommSpec(kind, int(self.comm_type[row]), int(self.nbytes[row]), self.names[g], self.members[g])
        src, dst, tag = self.channel[row].tolist()
        return CommSpec(kind, nbytes=int(self.nbytes[row]), channel=(src, dst, tag))

    def rows(self, records: np.ndarray) -> np.ndarray:
        """Rows of ``records`` (each must have a spec)."""
        return self.pos[records]

    @cached_property
    def kind_of(self) -> list[int]:
        """Kind code per record, -1 for records without a spec (the proof's per-node lookup)."""
        out = np.full(len(self.pos), -1, dtype=np.int64)
        out[self.index] = self.kind
        return out.tolist()


def comm_specs(
    g: TraceGraph,
    rank: int,
    usable: list[int],
    groups: dict[str, tuple[int, ...]],
    memo: SameInputs | None = None,
) -> CommSpecs:
    """Specs of the communication records ``usable`` (those without a ``comm-node`` problem).

    A collective whose ``pg_name`` names no group gets no spec (that is the ``pg-name`` rule); a
    send's ``comm_src`` and a receive's ``comm_dst`` default to the rank, as in ASTRA-sim.
    ``memo`` (one per analysis) shares the columns neither the rank nor its group names decide
    (:func:`_rank_free`) between ranks whose inputs are the very same objects.
    """
    key, named = memo.get("group-numbers", (groups,)) if memo is not None else (None, None)
    if named is None:
        names = tuple(groups)
        number = {name: k for k, name in enumerate(names)}  # by canonical name
        named = (names, tuple(groups.values()), number)
        if memo is not None and key is not None:
            memo.put(key, (groups,), named)
    names, members, number = named
    records = _records(g, usable, memo)
    group = np.full(len(records.idx), -1, dtype=np.int32)
    if len(records.coll_records):
        group[records.coll] = _group_codes(g, number, records.coll_records, memo)
    keep = group != NO_GROUP
    if keep.all():
        free = _rank_free(g, usable, records.idx, memo)
    else:  # a collective naming no group: this rank's own columns
        group = group[keep]
        free = _rank_free(g, usable, records.idx[keep], None)
    channel = free.channel if free.p2p_free else _channel(g, rank, free)
    return CommSpecs(free.index, free.kind, free.comm_type, free.nbytes, group, channel, names, members, free.pos)


@dataclass(frozen=True)
class _Records:
    """The records a rank's specs are built over (``usable``) and which of them are collectives."""

    idx: np.ndarray  # usable, as an array
    coll: np.ndarray  # mask over idx: a collective
    coll_records: np.ndarray  # idx[coll]


def _records(g: TraceGraph, usable: list[int], memo: SameInputs | None) -> _Records:
    """:class:`_Records` of ``usable``, once per distinct (types, ``usable``) of the analysis: the
    ranks of a pipeline stage share both (the very objects, as :func:`_rank_free`'s inputs), and the
    list-to-array conversion and masks were a fifth of :func:`comm_specs`' time at 1,024 ranks."""
    inputs = (g.types, usable)
    key, hit = memo.get("comm-records", inputs) if memo is not None else (None, None)
    if hit is not None:
        return hit
    idx = np.asarray(usable, dtype=np.int32)
    coll = g.types[idx] == schema.COMM_COLL_NODE
    records = _Records(idx, coll, idx[coll])
    for a in (idx, coll, records.coll_records):
        a.flags.writeable = False  # shared by every rank with these inputs
    if memo is not None and key is not None:
        memo.put(key, inputs, records)
    return records


def _group_codes(g: TraceGraph, number: dict[str, int], coll: np.ndarray, memo: SameInputs | None) -> np.ndarray:
    """Group number of the ``pg_name`` of each record ``coll`` (the world group's where it has none):
    one lookup per distinct name, not two dict lookups per record (a file has a few names on
    hundreds of collectives; 418k lookups were a third of this module's time at 1,024 ranks).

    Where each record's name sits among the graph's names (``sel``; one past them: none) depends on
    which records carry one, in which order, which the ranks of a pipeline stage share (their names
    differ): ``memo`` keeps it per ``coll`` array with those records, reused when they are equal."""
    world = number.get("", NO_GROUP)
    pg = g.pg_name
    if not pg:
        return np.full(len(coll), world, dtype=np.int32)
    carriers = list(pg.keys())
    key, hit = memo.get("pg-positions", (coll,)) if memo is not None else (None, None)
    if hit is not None and hit[0] == carriers:
        sel = hit[1]
    else:
        at = np.full(len(g), len(carriers), dtype=np.int64)
        at[np.asarray(carriers, dtype=np.int64)] = np.arange(len(carriers))
        sel = at[coll]
        if memo is not None and key is not None:
            memo.put(key, (coll,), (carriers, sel))
    code = {name: number.get(canonical_group(name), NO_GROUP) for name in set(pg.values())}
    codes = np.empty(len(carriers) + 1, dtype=np.int32)
    codes[:-1] = np.fromiter(map(code.__getitem__, pg.values()), dtype=np.int32, count=len(carriers))
    codes[-1] = world
    return codes[sel]


@dataclass(frozen=True)
class _RankFree:
    """The columns of :class:`CommSpecs` that neither the rank nor its group names decide."""

    index: np.ndarray
    kind: np.ndarray
    comm_type: np.ndarray
    nbytes: np.ndarray
    pos: np.ndarray
    p2p_free: bool  # every spec a collective: then the channels too are the same on every rank
    channel: np.ndarray  # (-1, -1, 0) per spec: every rank's channels when p2p_free, else their template
    p2p_rows: np.ndarray  # rows of the sends and receives, whose channels each rank fills with its own


def _rank_free(g: TraceGraph, usable: list[int], idx: np.ndarray, memo: SameInputs | None) -> _RankFree:
    """The rank-independent columns of the specs of records ``idx`` (``usable``, when ``memo`` is
    given). Why a memo: the ranks of a pipeline stage have the same records, types and sizes and
    differ only in group names and peers; at 1,024 ranks the per-rank copies were ~10 MB and most of
    :func:`comm_specs`' time. Its inputs are the very arrays after ``twins.SharedColumns.share``
    and the very ``comm_ok`` list the comm-node rule's memo returns; read-only, as they are shared."""
    inputs = (g.types, usable, *(c[n] for n in ("comm_type", "comm_size") for c in (g.attr_kind, g.attr_value)))
    key: tuple | None = None
    if memo is not None:
        key, hit = memo.get("comm-columns", inputs)
        if hit is not None:
            return hit
    types = g.types[idx]
    kind = np.where(types == schema.COMM_SEND_NODE, SEND, RECV)
    kind = np.where(types == schema.COMM_COLL_NODE, COLL, kind).astype(np.int8)
    sizes = np.where(g.has_int("comm_size"), g.attr_value["comm_size"], 0)[idx]
    if (sizes >= 0).all():
        nbytes: np.ndarray = sizes.astype(np.uint64)
    else:  # a uint64 size of 2^63 or more (the int64 column wraps it), exactly as exact_ints reads it
        exact = g.exact_ints("comm_size")
        nbytes = np.array([exact[i] for i in idx.tolist()], dtype=object)
    # int8: a collective's comm_type is in 0..9, or it has a comm-node problem and no spec
    comm_type = np.where(kind == COLL, g.int_attr("comm_type", -1)[idx], -1).astype(np.int8)
    pos = np.full(len(g), -1, dtype=np.int32)  # record -> row (-1: no spec)
    pos[idx] = np.arange(len(idx))
    channel = np.empty((len(idx), 3), dtype=np.int64)
    channel[:] = (-1, -1, 0)
    p2p_rows = np.flatnonzero(kind != COLL)
    free = _RankFree(idx, kind, comm_type, nbytes, pos, not len(p2p_rows), _narrow(channel), p2p_rows)
    for a in (idx, kind, comm_type, nbytes, pos, free.channel, p2p_rows):
        a.flags.writeable = False  # shared by every rank with these inputs
    if memo is not None and key is not None:
        memo.put(key, inputs, free)
    return free


def _channel(g: TraceGraph, rank: int, free: _RankFree) -> np.ndarray:
    """``(src, dst, tag)`` per spec: the shared ``(-1, -1, 0)`` of the collectives, and the rank's own
    at its sends and receives (the three attributes gathered at those rows together: a send or
    receive is a few records of a rank, and a dozen numpy calls per attribute and rank were most of
    :func:`comm_specs`' time at 1,024 ranks)."""
    at = free.p2p_rows
    rows = free.index[at]
    values = np.array([g.attr_value[name] for name in _PEER])[:, rows]
    if values.min() < 0:  # a stored negative integer, which int_attr may saturate: read it as that does
        values = np.array([g.int_attr(name, default)[rows] for name, default in zip(_PEER, (rank, rank, 0))])
        wide = not (-(2**31) <= values.min() and values.max() < 2**31)  # as _narrow decides for the whole
    else:  # stored values and defaults are all >= 0
        stored = INT_KIND[np.array([g.attr_kind[name] for name in _PEER])[:, rows]]  # g.has_int's rows
        values = np.where(stored, values, np.array([[rank], [rank], [0]]))
        wide = not values.max() < 2**31
    channel = free.channel.astype(np.int64) if wide else free.channel.copy()  # the template is int32
    channel[at] = values.T
    return channel


_PEER = ("comm_src", "comm_dst", "comm_tag")  # the channel's columns


def _narrow(channel: np.ndarray) -> np.ndarray:
    if channel.size and -(2**31) <= channel.min() and channel.max() < 2**31:  # the usual case: half the bytes
        return channel.astype(np.int32)
    return channel
