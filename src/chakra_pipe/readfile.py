"""Reading JSON and YAML input files with one-line errors (``file: where: what``), never a traceback.

Configs, comm-group files, plans, hardware files and results are all user-visible inputs; each
failure mode — unreadable, not UTF-8, malformed, nested past Python's recursion limit — gets the
same clear message and the caller's error class (``ConfigError`` for configs, else ``InputError``).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import zlib
from typing import Any

from .errors import ChakraPipeError, InputError


def read_json(path: str | os.PathLike, *, error: type[ChakraPipeError] = InputError) -> Any:
    """The parsed content of ``path`` (gzip detected by its magic bytes, as PyTorch traces often are);
    any failure raises ``error`` naming the file and position."""
    file = str(path)
    try:
        with open(path, "rb") as raw:
            stream = gzip.GzipFile(fileobj=raw) if raw.peek(2)[:2] == b"\x1f\x8b" else raw
            return json.load(io.TextIOWrapper(stream, encoding="utf-8"))
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise error(f"corrupt gzip stream: {exc}", file=file) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", file=file) from None
    except json.JSONDecodeError as exc:
        raise error(f"invalid JSON: {exc.msg}", file=file, where=f"line {exc.lineno} column {exc.colno}") from None
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text (byte offset {exc.start})", file=file) from None
    except RecursionError:
        raise error("invalid JSON: nested too deeply", file=file) from None


def read_yaml(path: str | os.PathLike, *, error: type[ChakraPipeError] = InputError) -> Any:
    """The parsed content of a YAML file (safe loader); failures as for :func:`read_json`."""
    import yaml

    file = str(path)
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror}", file=file) from None
    except yaml.YAMLError as exc:
        raise error(f"invalid YAML: {str(exc).splitlines()[0]}", file=file) from None
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text (byte offset {exc.start})", file=file) from None
    except RecursionError:
        raise error("invalid YAML: nested too deeply", file=file) from None
