"""Trace validation (chakra-format.md §9), trace statistics (``info``) and graph export (``visualize``).

Names are resolved lazily so registering the ``validate`` verb (every ``chakra-pipe`` start-up) does not
import the validator, numpy or protobuf.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr

if TYPE_CHECKING:  # the names as the type checker sees them; at run time __getattr__ below resolves them
    from .findings import ERROR, WARNING, Finding, Report  # noqa: F401 (exported: __all__)
    from .validator import validate_set, validate_trace  # noqa: F401 (exported: __all__)

_EXPORTS = {
    "ERROR": "findings",
    "WARNING": "findings",
    "Finding": "findings",
    "Report": "findings",
    "validate_set": "validator",
    "validate_trace": "validator",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
