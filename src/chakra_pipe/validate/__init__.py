"""Trace validation (chakra-format.md §9), trace statistics (``info``) and graph export (``visualize``)."""

from .findings import ERROR, WARNING, Finding, Report
from .validator import validate_set, validate_trace

__all__ = ["ERROR", "WARNING", "Finding", "Report", "validate_set", "validate_trace"]
