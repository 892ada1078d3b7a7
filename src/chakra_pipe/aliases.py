"""Upstream Chakra's flag spellings as aliases of our positional arguments.

Chakra users type ``chakra_jsonizer --input_filename X --output_filename Y`` and ``chakra_converter
PyTorch --input X --output Y``; the same words work here (``jsonize --input_filename X
--output_filename Y``), next to the short positional form. Giving both spellings with different
values is an error rather than a silent pick.
"""

from __future__ import annotations

import argparse
from typing import Any

from .errors import InputError

_ALIASES = "_path_aliases"


def path_argument(
    parser: argparse.ArgumentParser,
    dest: str,
    metavar: str,
    flags: tuple[str, ...],
    help: str,
    type: Any = None,
    required: bool = True,
) -> None:
    """A positional ``dest`` that may also be given as any of ``flags`` (resolved by :func:`resolve`)."""
    parser.add_argument(dest, nargs="?", metavar=metavar, type=type, help=help)
    parser.add_argument(
        *flags, dest=f"{dest}_alias", metavar=metavar, type=type, help=f"same as {metavar} (upstream Chakra spelling)"
    )
    aliases = dict(parser.get_default(_ALIASES) or {})
    aliases[dest] = (metavar, flags, required)
    parser.set_defaults(**{_ALIASES: aliases})


def resolve(args: argparse.Namespace) -> None:
    """Fold every alias into its positional; missing or conflicting values are input errors."""
    for dest, (metavar, flags, required) in (getattr(args, _ALIASES, None) or {}).items():
        pos, alias = getattr(args, dest), getattr(args, f"{dest}_alias")
        if pos is not None and alias is not None and pos != alias:
            raise InputError(f"{metavar} given twice with different values ({pos} and {flags[0]} {alias})")
        value = pos if pos is not None else alias
        if value is None and required:
            raise InputError(f"missing {metavar} (positional, or {' / '.join(flags)})")
        setattr(args, dest, value)


def comm_groups_option(parser: argparse.ArgumentParser) -> None:
    """The one comm-groups option of every verb that takes one (simulate, validate, replay).

    ``--comm-group-configuration`` is ASTRA-sim's spelling, ``--comm-groups`` the short alias; both
    set ``args.comm_groups``, read by :func:`chakra_pipe.et.traceset.comm_groups_option`.
    """
    parser.add_argument(
        "--comm-group-configuration",
        "--comm-groups",
        dest="comm_groups",
        metavar="CG.json",
        help="communicator groups {\"id\": [npus]}; the value 'empty' means none "
        "(default: PREFIX.comm_groups.json when present)",
    )
