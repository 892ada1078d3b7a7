"""The rank files of a prefix, found without importing the loader (numpy and the decoder).

Campaign planning checks that a trace workload's files exist on every Snakemake start; importing
``et.traceset`` for that one listing cost ~0.2 s of each start.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import InputError


def find_rank_files(prefix: str | os.PathLike) -> dict[int, Path]:
    """Every ``PREFIX.<rank>.et`` file that exists, by rank (gaps allowed: validators report them)."""
    prefix = str(prefix)
    folder = Path(prefix).parent
    pattern = re.compile(re.escape(Path(prefix).name) + r"\.([0-9]+)\.et$")
    try:
        return {
            int(m.group(1)): folder / name for name in sorted(os.listdir(folder or ".")) if (m := pattern.match(name))
        }
    except OSError as exc:
        raise InputError(f"cannot list trace folder: {exc.strerror}", file=prefix) from None
