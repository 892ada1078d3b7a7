"""Reading JSON and YAML input files with one-line errors (``file: where: what``), never a traceback.

Configs, comm-group files, plans, hardware files and results are all user-visible inputs; each
failure mode — unreadable, not UTF-8, malformed, nested past Python's recursion limit, a gzip bomb
(see :mod:`chakra_pipe.decompress`) — gets the same clear message and the caller's error class
(``ConfigError`` for configs, else ``InputError``). Both readers also refuse what would otherwise
be read *silently wrong*:

* a duplicate key (JSON and YAML keep the last value; which one the user meant is a guess);
* a non-finite number (``NaN``/``Infinity`` literals, or ``1e999`` overflowing to inf) and an
  integer past Python's 4,300-digit conversion limit (a ``ValueError`` deep in the parser);
* in YAML, a document that expands through aliases to more than ``MAX_YAML_NODES`` values
  (an "alias bomb": a few hundred bytes that become gigabytes once a consumer walks them).

YAML is read as ASTRA-sim's yaml-cpp reads it where the two YAML versions differ: ``1e308`` and
``1.5e3`` are numbers (YAML 1.1, and so PyYAML, reads a float without a dot or exponent sign as a
string); ``010`` is ten (not octal eight); ``0x1F`` is hexadecimal; YAML 1.1-only numbers
(``0b101``, ``1_000``, base-60 ``1:30``) are refused rather than read differently. A flat file of
one-line ``key: [ v, ... ]`` entries (every ASTRA-sim network file) is read without importing PyYAML
(:func:`flat_yaml`), to the same values; anything else goes through PyYAML.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from typing import Any

from .decompress import read_input
from .errors import ChakraPipeError, InputError

MAX_YAML_NODES = 1_000_000
_DIGITS = re.compile(r"[0-9]{4301,}")


class _Refused(Exception):
    """A value the parser accepted but we refuse; ``needle`` is text to locate it by."""

    def __init__(self, what: str, needle: str, nth: int = 1):
        super().__init__(what)
        self.what, self.needle, self.nth = what, needle, nth


def _position(text: str, needle: str, nth: int = 1) -> str | None:
    """``line L column C`` of the ``nth`` occurrence of ``needle`` in ``text`` (None if absent)."""
    at = -1
    for _ in range(nth):
        at = text.find(needle, at + 1)
        if at < 0:
            return None
    line = text.count("\n", 0, at) + 1
    return f"line {line} column {at - (text.rfind(chr(10), 0, at) + 1) + 1}"


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _Refused(
            f"duplicate key {_brief(key)} (refusing to guess which value was meant)",
            json.dumps(key) if len(key) < 200 else key[:200],
            2,
        )
    return out


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {text[:40]} overflows a double (it would read as infinity)", text)
    return value


def _constant(name: str) -> float:
    raise _Refused(f"{name} is not a finite number", name)


def _brief(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def parse_json(text: str, file: str, *, error: type[ChakraPipeError] = InputError, strict: bool = True) -> Any:
    """Parse JSON ``text`` read from ``file``, refusing as described in the module docstring.

    ``strict=False`` is for machine-written traces (Kineto, PyTorch host ET): their writers emit
    ``NaN``/``Infinity`` for float arguments, and the duplicate-key check costs about 30% of the
    parse time of a 100 MB trace, so only the integer-length limit is still refused cleanly.
    """
    try:
        if not strict:
            return json.loads(text)
        return json.loads(text, object_pairs_hook=_unique, parse_float=_finite, parse_constant=_constant)
    except _Refused as exc:
        raise error(exc.what, file=file, where=_position(text, exc.needle, exc.nth)) from None
    except json.JSONDecodeError as exc:
        raise error(f"invalid JSON: {exc.msg}", file=file, where=f"line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise error("invalid JSON: nested too deeply", file=file) from None
    except ValueError:  # int() past sys.get_int_max_str_digits(); nothing else in json raises it
        m = _DIGITS.search(text)
        raise error(
            "integer with more than 4,300 digits (past Python's conversion limit)",
            file=file,
            where=_position(text, m.group(0)[:50]) if m else None,
        ) from None


def _text(path: str | os.PathLike, error: type[ChakraPipeError]) -> str:
    data = read_input(path, error)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text (byte offset {exc.start})", file=str(path)) from None


def read_json(path: str | os.PathLike, *, error: type[ChakraPipeError] = InputError, strict: bool = True) -> Any:
    """The parsed content of ``path`` (gzip detected by its magic bytes, as PyTorch traces often are);
    any failure raises ``error`` naming the file and position (``strict``: see :func:`parse_json`)."""
    return parse_json(_text(path, error), str(path), error=error, strict=strict)


@functools.cache
def _yaml_loader():
    """A SafeLoader subclass reading numbers as yaml-cpp does, refusing duplicate keys and bombs."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_document(self, node):
            _expanded_size(node)
            return super().construct_document(node)

        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                self.flatten_mapping(node)
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    key = self.construct_object(key_node, deep=True)
                    try:
                        dup = key in seen
                        seen.add(key)
                    except TypeError:  # an unhashable key: SafeLoader's own error follows
                        break
                    if dup:
                        raise yaml.constructor.ConstructorError(
                            None,
                            None,
                            f"duplicate key {_brief(key)} (refusing to guess which value was meant)",
                            key_node.start_mark,
                        )
            return super().construct_mapping(node, deep)

        def construct_yaml_int(self, node):
            text = node.value
            if _CPP_INT.fullmatch(text):  # "010" is 10 for yaml-cpp (std::stringstream), 8 in YAML 1.1
                return int(text, 10)
            if _CPP_HEX.fullmatch(text):
                return int(text, 16)
            raise _yaml_cpp_refuses(text, node)

        def construct_yaml_float(self, node):
            if "_" in node.value or ":" in node.value:  # YAML 1.1's 1_000.5 and 1:30.5 (base 60)
                raise _yaml_cpp_refuses(node.value, node)
            value = super().construct_yaml_float(node)
            if not math.isfinite(value) and not re.search(r"\.(inf|nan)", node.value, re.IGNORECASE):
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"number {node.value[:40]} overflows a double (it would read as infinity)",
                    node.start_mark,
                )
            return value

    Loader.add_constructor("tag:yaml.org,2002:float", Loader.construct_yaml_float)
    Loader.add_constructor("tag:yaml.org,2002:int", Loader.construct_yaml_int)
    # YAML 1.2 / yaml-cpp floats that YAML 1.1 reads as strings: an exponent without a sign or dot.
    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
        list("-+0123456789."),
    )
    return Loader


_CPP_INT = re.compile(r"[-+]?[0-9]+")
_CPP_HEX = re.compile(r"[-+]?0x[0-9a-fA-F]+")


def _yaml_cpp_refuses(text: str, node):
    import yaml

    return yaml.constructor.ConstructorError(
        None,
        None,
        f"{text[:40]!r} is a number only in YAML 1.1 (ASTRA-sim's yaml-cpp does not read it as one)",
        node.start_mark,
    )


def _expanded_size(root) -> int:
    """Values ``root`` expands to with every alias followed; refuses past ``MAX_YAML_NODES`` and a
    recursive alias. Iterative and memoised per node, so the check itself is linear in the file."""
    import yaml

    size: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in size and not done:
            continue
        children = (
            [c for pair in node.value for c in pair]
            if isinstance(node, yaml.MappingNode)
            else node.value
            if isinstance(node, yaml.SequenceNode)
            else []
        )
        if done:
            total = 1 + sum(size[id(c)] for c in children)
            if total > MAX_YAML_NODES:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"the document expands to more than {MAX_YAML_NODES:,} values through aliases (a YAML alias bomb?)",
                    node.start_mark,
                )
            size[id(node)] = total
            continue
        size[id(node)] = -1  # in progress: meeting it again below it is a recursive alias
        stack.append((node, True))
        for c in children:
            if size.get(id(c)) == -1:
                raise yaml.composer.ComposerError(None, None, "recursive alias", c.start_mark)
            if id(c) not in size:
                stack.append((c, False))
    return size[id(root)]


# The flat subset ASTRA-sim network files use (``key: [ v, v ]  # comment`` per line), read without
# importing PyYAML: its import is ~25 ms of every ``simulate`` start-up, more than the rest of the
# config reading (issue #15). Anything else goes to PyYAML. Accepted words and numbers are only those
# whose reading no resolver, YAML 1.1 quirk or yaml-cpp rule changes (no leading zeros, exponents,
# underscores, yes/no/on/off/null), so both readers give equal values (tests/test_readfile_yaml_flat.py).
_FLAT_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*): +(\[[^\[\]#]*\]|[^ \[\]#,]+) *(?: #[^\n]*)?")
# At most 18 digits a part: no integer near Python's digit limit, no float that overflows (PyYAML's path
# refuses those with a line and column).
_FLAT_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")
_FLAT_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})\.[0-9]{1,18}")
_FLAT_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_YAML11_WORDS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})
# Comments may hold any printable ASCII; any other character (YAML's other line breaks \r, \x85,
# \u2028, \u2029, control characters, a BOM, non-ASCII) goes to PyYAML, which decides what it means.
_FLAT_UNUSUAL = re.compile(r"[^\n -~]")


def _flat_scalar(text: str) -> Any:
    """The value of a plain scalar in the flat subset; raises ``LookupError`` outside it."""
    if _FLAT_INT.fullmatch(text):
        return int(text)
    if _FLAT_FLOAT.fullmatch(text):
        return float(text)
    if _FLAT_WORD.fullmatch(text) and text.lower() not in _YAML11_WORDS:
        return text
    raise LookupError(text)


def flat_yaml(text: str) -> dict[str, Any] | None:
    """``text`` read as a flat mapping of scalars and one-line lists, or None when it is not one.

    None means "ask PyYAML" (which also reports every error): a line of another form, a tab, a
    duplicate key, a scalar outside the unambiguous subset, or no key at all.
    """
    if _FLAT_UNUSUAL.search(text):
        return None
    out: dict[str, Any] = {}
    try:
        for line in text.split("\n"):
            stripped = line.strip(" ")
            if not stripped or stripped.startswith("#"):
                continue
            m = _FLAT_LINE.fullmatch(line)
            if m is None or m.group(1) in out or m.group(1).lower() in _YAML11_WORDS:
                return None
            value = m.group(2)
            if value.startswith("["):
                items = value[1:-1].split(",")
                if items == [""] or all(not i.strip(" ") for i in items):
                    return None  # "[]" and "[ ]": left to PyYAML
                out[m.group(1)] = [_flat_scalar(i.strip(" ")) for i in items]
            else:
                out[m.group(1)] = _flat_scalar(value)
    except LookupError:
        return None
    return out or None


def read_yaml(path: str | os.PathLike, *, error: type[ChakraPipeError] = InputError) -> Any:
    """The parsed content of a YAML file (safe loader); failures as for :func:`read_json`."""
    file = str(path)
    text = _text(path, error)
    flat = flat_yaml(text)
    if flat is not None:
        return flat
    return parse_yaml(text, file, error=error)


def parse_yaml(text: str, file: str, *, error: type[ChakraPipeError] = InputError) -> Any:
    """Parse YAML ``text`` read from ``file`` with PyYAML, refusing as the module docstring says."""
    import yaml

    try:
        return yaml.load(text, Loader=_yaml_loader())  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(f"invalid YAML: {problem}", file=file, where=where) from None
    except RecursionError:
        raise error("invalid YAML: nested too deeply", file=file) from None
    except ValueError as exc:  # int() past Python's digit limit, or an impossible timestamp
        m = _DIGITS.search(text)
        if m is None:
            raise error(f"invalid YAML value: {exc}", file=file) from None
        raise error(
            "integer with more than 4,300 digits (past Python's conversion limit)",
            file=file,
            where=_position(text, m.group(0)[:50]),
        ) from None
