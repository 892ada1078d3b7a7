"""CSV text that every reader splits into the records it was written from.

Python before 3.12 quotes a field only for the delimiter, the quote character and the characters of
the line terminator. Our files end records with ``\\n``, so a workload or campaign called ``"\\r"``
was written bare and read back by pandas (and most CSV readers) as a record break: the standing board
then lost its key and a rerun re-dated every entry. These helpers quote such fields.
"""

from __future__ import annotations

import csv
import io
from typing import Any


def quote_bare_cr(text: str) -> str:
    """Quote every unquoted field of ``text`` (``,``-separated, ``\\n``-terminated) that holds ``\\r``.

    A bare field holds no quote, comma or newline (the writer would have quoted it), so it runs to the
    next ``,`` or ``\\n``; a quoted one runs to its closing quote (doubled quotes inside).
    """
    if "\r" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == '"':
            j = i + 1
            while True:
                j = text.index('"', j)
                if j + 1 < n and text[j + 1] == '"':
                    j += 2
                    continue
                break
            out.append(text[i : j + 1])
            i = j + 1
        j = i
        while j < n and text[j] not in ",\n":
            j += 1
        field = text[i:j]
        out.append(f'"{field}"' if "\r" in field else field)
        if j < n:
            out.append(text[j])
        i = j + 1
    return "".join(out)


def frame_csv(df: Any, **options: Any) -> str:
    """``df.to_csv`` without the index, ``\\n``-terminated, every field that holds ``\\r`` quoted."""
    return quote_bare_cr(df.to_csv(index=False, lineterminator="\n", **options))


def rows_csv(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    """Dict rows under a header of ``columns`` (None as empty), as :func:`frame_csv` writes them."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", extrasaction="raise")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: "" if row.get(c) is None else row.get(c) for c in columns})
    return quote_bare_cr(buf.getvalue())
