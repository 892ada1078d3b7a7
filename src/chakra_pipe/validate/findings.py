"""Validator findings: one record per problem, printed one line each, counted exactly.

The printed form is what users grep and what CI logs show; the last line is the machine-checkable
summary ``E errors, W warnings``. Printing is capped per (file, rule) so a legacy trace with a
thousand dangling references stays readable, but counts and ``--json`` always include everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field

ERROR = "error"
WARNING = "warning"
PRINT_CAP = 20  # findings of one rule printed per file before "... N more"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: ``node`` is the node id it concerns, None for file- or set-level findings."""

    file: str
    node: int | None
    rule: str
    severity: str
    message: str

    @property
    def is_error(self) -> bool:
        return self.severity == ERROR

    def line(self) -> str:
        where = f"node {self.node}: " if self.node is not None else ""
        return f"{self.file}: {where}{self.severity}: {self.rule}: {self.message}"


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


def capped_lines(findings: Iterable[Finding], cap: int) -> Iterator[str]:
    """Group by (file, rule) in first-appearance order; print ``cap`` of each and a count of the rest."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.file, f.rule), []).append(f)
    for (file, rule), group in groups.items():
        for f in group[:cap]:
            yield f.line()
        if len(group) > cap:
            rest = group[cap:]
            errors = sum(1 for f in rest if f.is_error)
            kinds = ", ".join(
                p
                for p in (
                    f"{errors} errors" if errors else "",
                    f"{len(rest) - errors} warnings" if len(rest) > errors else "",
                )
                if p
            )
            yield f"{file}: ... {len(rest)} more {rule} findings ({kinds})"
