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


def _lines(problems: Iterable[Finding]) -> str:
    return "\n".join(capped_lines(problems))


class SetRefused(InputError):
    """A rank set a stage refuses on input grounds (exit 2); prints one problem line each.

    ``line()`` (what the CLI prints after ``chakra-pipe VERB: error:``) starts with a count, so every
    problem line that follows is exactly :meth:`Finding.line`.
    """

    def __init__(self, problems: list[Finding]):
        self.problems = problems
        text = f"the rank set has {len(problems)} problem(s):\n{_lines(problems)}"
        super().__init__(text)
        self.what = text  # never truncated: each line names its own file and node
        self.args = (text,)

    def line(self) -> str:
        return self.what


class SetStuck(StuckError):
    """A rank set that cannot finish (exit 3): ``stuck`` maps rank to its blocked node ids.

    The message carries the ``set-deadlock`` problem line(s) validate reports for the same set.
    """

    def __init__(self, problems: list[Finding], stuck: dict[int, list[int]], file: str):
        self.problems = problems
        text = f"the rank set cannot finish:\n{_lines(problems)}"
        super().__init__(text, stuck=stuck)
        self.what, self.file, self.args = text, file, (text,)

    def line(self) -> str:
        return self.what
