"""Which text is a whole number: ASCII digits only, one rule for every reader of traces and configs.

``str.isdigit`` (and ``isdecimal``/``isnumeric``) accept Unicode digits: ``"²".isdigit()`` is true
yet ``int("²")`` raises, and ``int("٣")`` is 3 where ASTRA-sim's C++ readers and Chakra's tools see
no number at all. A check built on them either lets a traceback through or accepts a name the
reference refuses, so every such check goes through :func:`is_int_text` instead.
"""

from __future__ import annotations

import re

_UNSIGNED = re.compile(r"[0-9]+")
_SIGNED = re.compile(r"[-+]?[0-9]+")


def is_int_text(text: str, *, signed: bool = False) -> bool:
    """True when ``text`` is one or more ASCII digits (after one ``+``/``-`` when ``signed``).

    No surrounding white space is allowed: callers that accept it strip first, so the rule stays
    visible where it applies. ``int(text)`` never raises for text this accepts.
    """
    return (_SIGNED if signed else _UNSIGNED).fullmatch(text) is not None
