"""Validator findings: one record per problem, printed one line each, counted exactly.

The printed form is what users grep and what CI logs show; the last line is the machine-checkable
summary ``E errors, W warnings``. Printing is capped per (file, rule) so a legacy trace with a
thousand dangling references stays readable, but counts and ``--json`` always include everything.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

from ..rankset.problems import ERROR, PRINT_CAP, WARNING, Finding, capped_lines

__all__ = ["ERROR", "PRINT_CAP", "WARNING", "Finding", "Report", "capped_lines"]


@dataclass
class Report:
    """All findings of one validation run (one file or one rank set) and their counts."""

    files: list[str]
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.is_error)

    @property
    def warnings(self) -> int:
        return len(self.findings) - self.errors

    @property
    def ok(self) -> bool:
        return self.errors == 0

    def summary(self) -> str:
        return f"{self.errors} errors, {self.warnings} warnings"

    def count(self, rule: str, severity: str | None = None) -> int:
        return sum(1 for f in self.findings if f.rule == rule and (severity is None or f.severity == severity))

    def lines(self, cap: int = PRINT_CAP) -> Iterator[str]:
        """Printable lines, at most ``cap`` per (file, rule), ending with the summary line."""
        yield from capped_lines(self.findings, cap)
        yield self.summary()

    def to_json(self) -> dict:
        return {
            "files": list(self.files),
            "errors": self.errors,
            "warnings": self.warnings,
            "findings": [asdict(f) for f in self.findings],
        }
