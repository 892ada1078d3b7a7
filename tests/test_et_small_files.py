"""Small files load the same whether or not protobuf is loaded yet.

Why: a few records decode faster through the protobuf message classes once they exist, but a small
``simulate`` must not import protobuf for them (issue #15), so before the classes exist small files
go through the vectorised loader too. A user relies on either path giving the same findings,
errors and exit codes: this compares ``validate`` on mutated copies of a generated rank file in an
interpreter where small files always take the vectorised path (as before protobuf is loaded) with
the same command here (classes built: small files through protobuf).
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import subprocess
import sys

from byte_mutations import mutate

from chakra_pipe import cli
from chakra_pipe.et import schema

VALIDATE_EACH = """\
import contextlib, io, json, sys
from chakra_pipe.cli import main
from chakra_pipe.et import schema
schema.built = lambda: False  # every file as the first of a run that has not loaded protobuf
out = []
for path in sys.argv[1:]:
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        rc = main(["validate", path])
    out.append([rc, o.getvalue(), e.getvalue()])
print(json.dumps(out))
"""


def _mutants(seed: bytes, count: int, folder) -> list[str]:
    rng = random.Random(15)
    paths = []
    for k in range(count):
        path = folder / f"m{k}.et"
        path.write_bytes(mutate(seed, rng))
        paths.append(str(path))
    return paths


def test_small_files_read_alike_with_and_without_protobuf(tmp_path):
    prefix = str(tmp_path / "ar")
    argv = ["generate", "collective", "--type", "all_reduce", "--npus", "2", "--size", "1MiB", "--out", prefix]
    assert cli.main(argv) == 0
    paths = [f"{prefix}.0.et", *_mutants((tmp_path / "ar.0.et").read_bytes(), 120, tmp_path)]
    done = subprocess.run([sys.executable, "-c", VALIDATE_EACH, *paths], capture_output=True, text=True, timeout=300)
    fresh = json.loads(done.stdout)
    schema.Node  # noqa: B018 (builds the message classes: small files now go through protobuf)
    assert schema.built()
    for path, want in zip(paths, fresh):
        o, e = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
            rc = cli.main(["validate", path])
        assert [rc, o.getvalue(), e.getvalue()] == want, path
    assert fresh[0][0] == 0 and {rc for rc, _, _ in fresh} == {0, 1, 2}  # good, refused and unreadable files
