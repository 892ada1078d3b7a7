"""The PyTorch process-group table a METADATA node carries, read one way by every stage.

PyTorch's ``## process_group:init ##`` record lists the groups as JSON; Chakra stores the Python repr
of the one-element input list, so ``inputs.values`` is ``['<json>']``. ASTRA-sim strips two
characters from each end, JSON-parses the rest and numbers each group ``int(pg_name) + 1``. The
validator, the simulator and the replayer all read it through :func:`parse_process_groups`, so a
table one of them accepts is never refused by another.
"""

from __future__ import annotations

import json

from ..digits import is_int_text


def parse_process_groups(values: str) -> tuple[dict[str, list[int]], str]:
    """``({pg_name: ranks}, "")`` from a METADATA ``inputs.values``, or ``({}, problem)``.

    ASTRA-sim strips two characters from each end (the ``['`` and ``']`` of a one-element Python
    list repr) and JSON-parses the rest, so that exact shape is required.
    """
    shown = values if len(values) <= 60 else values[:57] + "..."
    if not (len(values) >= 4 and values.startswith("['") and values.endswith("']")):
        return {}, f"is {shown!r}; ASTRA-sim needs \"['<json>']\""
    try:
        table = json.loads(values[2:-2])
    except json.JSONDecodeError as exc:
        return {}, f"does not hold JSON after stripping ['…']: {exc.msg} at character {exc.pos}"
    except RecursionError:
        return {}, "holds JSON nested too deeply"
    if not isinstance(table, list):
        return {}, "JSON is not a list of process groups"
    groups: dict[str, list[int]] = {}
    for k, entry in enumerate(table):
        if not isinstance(entry, dict) or not isinstance(entry.get("pg_name"), str):
            return {}, f"process group #{k} has no string pg_name"
        if not is_int_text(entry["pg_name"]):
            return {}, (
                f"process group pg_name {entry['pg_name']!r} is not an integer of ASCII digits (ASTRA-sim numbers "
                "METADATA groups pg_name + 1)"
            )
        ranks = entry.get("ranks")
        if not (
            isinstance(ranks, list) and all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks)
        ):
            return {}, f"process group {entry['pg_name']!r} has no list of non-negative integer ranks"
        if groups.setdefault(entry["pg_name"], list(ranks)) != list(ranks):
            return {}, f"process group {entry['pg_name']!r} is listed twice with different ranks"
    return groups, ""


def format_process_groups(table: list[dict], compact: bool = True) -> str:
    """The METADATA ``inputs.values`` for a process-group table: ``['<json>']``, parseable above.

    ``compact`` picks the generator's separators (``,``/``:``); otherwise PyTorch's (``, ``/``: ``),
    so a rewritten table keeps the style of the trace it came from. Refuses text ASTRA-sim's
    two-character strip would mangle (a quote or backslash inside the JSON).
    """
    text = json.dumps(table, separators=(",", ":") if compact else (", ", ": "), ensure_ascii=True)
    if "'" in text or "\\" in text:
        raise ValueError("process-group table holds a quote or backslash ASTRA-sim cannot parse")
    return f"['{text}']"
