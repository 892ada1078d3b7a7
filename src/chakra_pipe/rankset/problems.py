"""Problem records: what every stage reports about a rank set, in one printed form.

A problem names the file, the node id (None for file- or set-level problems), a rule name, a
severity and a message. ``validate`` lists them as its findings; ``simulate`` and ``replay`` print
the same lines when they refuse a set, so a user (and the cross-stage agreement test) can match
one stage's report to another's line by line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..errors import InputError, StuckError

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


def capped_lines(findings: Iterable[Finding], cap: int = PRINT_CAP) -> Iterator[str]:
    """Group by (file, rule) in first-appearance order; print ``cap`` of each and a count of the rest.

    A legacy trace with a thousand dangling references stays readable; counts stay exact.
    """
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


def _summary(what: str, problems: list[Finding]) -> tuple[str, str | None, str | None]:
    """``(what, file, where)`` of the error line: the first problem's file and node, so the one line a
    sweep row or a log keeps names them like every other error. Deliberately not in problem-line form
    (no ``error: RULE:`` after the node), so a reader that picks problem lines out of the output finds
    exactly the ``details``."""
    if not problems:
        return what, None, None
    p = problems[0]
    return f"{what}; the first: {p.rule}: {p.message}", p.file, None if p.node is None else f"node {p.node}"


class _ProblemList:
    """``str()`` of a refusal: its one-line summary followed by every problem line."""

    details: tuple[str, ...]

    def __str__(self) -> str:
        return "\n".join([self.line(), *self.details])  # type: ignore[attr-defined]


class SetRefused(_ProblemList, InputError):
    """A rank set a stage refuses on input grounds (exit 2).

    The error line names the first problem; ``details`` (printed by the CLI after it) holds every
    problem as :meth:`Finding.line` prints it, capped per (file, rule) as validate caps them.
    """

    def __init__(self, problems: list[Finding]):
        self.problems = problems
        self.details = tuple(capped_lines(problems))
        what, file, where = _summary(f"the rank set has {len(problems)} problem(s)", problems)
        super().__init__(what, file=file, where=where)


class SetStuck(_ProblemList, StuckError):
    """A rank set that cannot finish (exit 3): ``stuck`` maps rank to its blocked node ids.

    ``details`` carries the problem lines validate reports for the same set (``set-deadlock`` ones
    with the same stuck nodes, and the mismatches that explain them).
    """

    def __init__(
        self,
        problems: list[Finding],
        stuck: dict[int, list[int]],
        why: str | None = None,
        finished: dict[int, tuple[int, int]] | None = None,
    ):
        self.problems = problems
        self.details = tuple(capped_lines(problems))
        what, file, where = _summary("the rank set cannot finish" + (f" ({why})" if why else ""), problems)
        super().__init__(what, file=file, where=where, stuck=stuck, finished=finished)
