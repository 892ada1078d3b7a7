"""The README documents every exit code the CLI can return and every error class a user can meet.

Error classes are the subclasses of ``ChakraPipeError`` defined anywhere in the package; each must appear
by name in the README together with its exit code, so adding a class (or changing a code) without
documenting it fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from chakra_pipe import errors
from chakra_pipe.errors import ChakraPipeError

README = Path(__file__).resolve().parent.parent / "README.md"
SRC = Path(errors.__file__).resolve().parent
CLI_ONLY_CODES = {
    130: "interrupted (Ctrl-C)",
    143: "terminated (SIGTERM)",
}  # returned by cli.main itself, not by an error class


def _error_classes() -> dict[str, int]:
    """Name -> exit code of ``ChakraPipeError`` and every subclass defined in the package's source.

    Read from the source (class bases and ``exit_code = EXIT_*`` assignments) rather than by importing
    every module, which would import torch for capture and replay.
    """
    classes: dict[str, tuple[str, str | None]] = {}  # name -> (base, EXIT_* name or None)
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.bases and isinstance(node.bases[0], ast.Name):
                code = next(
                    (
                        stmt.value.id
                        for stmt in node.body
                        if isinstance(stmt, ast.Assign)
                        and [t.id for t in stmt.targets if isinstance(t, ast.Name)] == ["exit_code"]
                        and isinstance(stmt.value, ast.Name)
                    ),
                    None,
                )
                classes[node.name] = (node.bases[0].id, code)
    found = {"ChakraPipeError": ChakraPipeError.exit_code}
    grew = True
    while grew:
        grew = False
        for name, (base, code) in classes.items():
            if name not in found and base in found:
                found[name] = getattr(errors, code) if code else found[base]
                grew = True
    return found


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def test_exit_code_table_lists_every_code():
    text = _readme()
    codes = set(_error_classes().values()) | {0} | set(CLI_ONLY_CODES)
    for code in sorted(codes):
        assert re.search(rf"^\|\s*{code}\s*\|", text, re.M), f"exit code {code} is not in the README's table"


def test_every_error_class_is_documented_with_its_exit_code():
    text = _readme()
    missing = []
    for name, code in sorted(_error_classes().items()):
        rows = [line for line in text.splitlines() if re.search(rf"`{name}`", line)]
        if not any(re.search(rf"(^|\D){code}(\D|$)", row) for row in rows):
            missing.append(f"{name} (exit {code})")
    assert not missing, "error classes not documented with their exit code: " + ", ".join(missing)
