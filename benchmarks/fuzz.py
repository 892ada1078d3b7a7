"""The long fuzzing run: mutated ``.et`` rank sets through the reader, ``info``, ``validate`` and ``simulate``.

The CI version is ``tests/test_robust_fuzz.py`` (hypothesis, about a hundred examples, seconds). This
script runs the same contract for as long as you give it, with structure-aware mutations on top of
byte-level ones, and keeps every failing input:

    python benchmarks/fuzz.py --minutes 60 [--seed 1] [--out DIR] [--timeout 30] [--memory-gb 4]

Inputs are the committed corpus' rank sets (``tests/data/robust/traces``) plus a generated LLM set
(DP×TP×PP with process groups). Each case mutates one or two rank files of one set:

* bytes: bit flips, byte overwrites, truncation, insertion, deletion, a huge length prefix, gzip
  compression (so later edits corrupt a compressed stream);
* records: drop, duplicate or swap whole records, splice a record from another set, truncate a record;
* varints inside records: overwrite with 10-byte maximal values (ids, dependency lists, sizes).

Contract per verb (the README's): a result, or a ``ChakraPipeError`` with exit code 1/2/3 and a
message naming a file; the strict reader and the graph loader agree; each verb finishes within
``--timeout`` seconds; peak memory stays under ``--memory-gb``. A violation is written to
``OUT/<n>/`` (the rank set and ``what.txt``) and counted; the run goes on. Prints cases/s and a
per-verb outcome histogram every minute and at the end; exit status 1 when anything was found.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

from chakra_pipe.atomic import write_bytes, write_text
from chakra_pipe.errors import ChakraPipeError, TraceFormatError
from chakra_pipe.et.framing import read_trace
from chakra_pipe.et.graph import load_graph
from chakra_pipe.et.traceset import TraceSet

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "data" / "robust" / "traces"
SYSTEM = ('{"scheduling-policy": "LIFO", "collective-optimization": "baseline", "endpoint-delay": 10, '
          '"preferred-dataset-splits": 4, "local-mem-bw": 1600, "peak-perf": 900, "roofline-enabled": 1, '
          '"all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"], '
          '"reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["ring"]}')


class Expired(Exception):
    """A verb ran past its time bound."""


def _expire(signum, frame):
    raise Expired()


def records(data: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` byte spans of the framed records, as far as the framing is intact."""
    spans, pos = [], 0
    while pos < len(data):
        start, length, shift = pos, 0, 0
        while pos < len(data) and pos - start < 5:
            b = data[pos]
            pos += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        if pos + length > len(data):
            break
        pos += length
        spans.append((start, pos))
    return spans


def mutate(rng: random.Random, data: bytes, donor: bytes) -> tuple[bytes, str]:
    """One random edit of ``data`` (``donor`` is another file for splicing); returns bytes and a label."""
    b = bytearray(data)
    spans = records(data)[1:]  # node records; the metadata record is left to byte-level edits
    # Record-level edits keep the framing valid more often, so they reach validate and simulate.
    op = rng.choice(["flip", "set", "truncate", "insert", "delete", "huge_prefix", "cut_record", "max_varint",
                     "gzip", *["drop_record", "dup_record", "swap_records", "splice"] * 3])
    if not b:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))), "random"
    i = rng.randrange(len(b))
    if op == "flip":
        b[i] ^= 1 << rng.randrange(8)
    elif op == "set":
        b[i] = rng.randrange(256)
    elif op == "truncate":
        del b[i:]
    elif op == "insert":
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    elif op == "delete":
        del b[i:i + rng.randint(1, 8)]
    elif op == "huge_prefix":
        b[i:i] = rng.choice([b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\x01", b"\x80\x80\x80\x80"])
    elif op == "max_varint":
        b[i:i] = b"\xff" * 9 + b"\x01"
    elif op == "gzip":  # readers detect gzip by magic bytes; later edits then hit the compressed stream
        b = bytearray(gzip.compress(data, mtime=0))
    elif spans and op == "drop_record":
        s, e = rng.choice(spans)
        del b[s:e]
    elif spans and op == "dup_record":
        s, e = rng.choice(spans)
        b[e:e] = data[s:e]
    elif len(spans) > 1 and op == "swap_records":
        (s1, e1), (s2, e2) = sorted(rng.sample(spans, 2))
        b = bytearray(data[:s1] + data[s2:e2] + data[e1:s2] + data[s1:e1] + data[e2:])
    elif spans and op == "splice":
        donor_spans = records(donor)[1:]
        if donor_spans:
            s, e = rng.choice(donor_spans)
            at = rng.choice(spans)[1]
            b[at:at] = donor[s:e]
    elif spans and op == "cut_record":
        s, e = rng.choice(spans)
        del b[rng.randint(s + 1, max(s + 1, e - 1)):e]
    else:
        b[i] ^= 0xFF
        op = "invert"
    return bytes(b), op


def _graph_accepts(path: str) -> bool:
    """Whether the graph loader reads the whole file, attributes and every record included."""
    try:
        g = load_graph(path)
        g.attr_kind  # noqa: B018 -- attributes decode lazily
        for i in range(len(g)):
            g.node(i)
    except TraceFormatError:
        return False
    return True


def generated_set(directory: Path) -> Path:
    """A DP×TP×PP LLM step (8 ranks, process groups, 70 nodes per rank: more than the graph loader's
    record-by-record limit, so the vectorised decoder is fuzzed too) from the project's own generator."""
    from chakra_pipe.cli import main

    prefix = directory / "llm" / "t"
    main(["generate", "llm", "--model", "llama3-8b", "--layers", "8", "--hidden", "256", "--ffn", "512",
          "--heads", "4", "--vocab", "1000", "--seq", "64", "--dp", "2", "--tp", "2", "--pp", "2",
          "--out", str(prefix)])
    return prefix


def rank_sets(directory: Path) -> list[tuple[Path, int]]:
    """Every decodable corpus set (the undecodable ones are already mutations) and a generated one."""
    manifest = json.loads((CORPUS.parent / "MANIFEST.json").read_text())
    out = [(CORPUS / name, 2) for name, case in sorted(manifest.items()) if case["expect"]["info"] == 0]
    # The generated set is the only one past the record-by-record limit: draw it as often as all the
    # corpus sets together.
    out += [(generated_set(directory), 8)] * len(out)
    return out


class Fuzzer:
    def __init__(self, args: argparse.Namespace, scratch: Path):
        self.args, self.scratch = args, scratch
        self.rng = random.Random(args.seed)
        self.sets = rank_sets(scratch)
        self.hw = {}
        self.outcomes: Counter[str] = Counter()
        self.mutations: Counter[str] = Counter()
        self.found = 0
        self.cases = 0

    def hardware(self, npus: int):
        from chakra_pipe.sim import load_hardware

        if npus not in self.hw:
            net = self.scratch / f"ring{npus}.yml"
            write_text(net, f"topology: [ Ring ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
            system = self.scratch / "system.json"
            write_text(system, SYSTEM)
            self.hw[npus] = load_hardware(system, net)
        return self.hw[npus]

    def case(self) -> None:
        src, npus = self.rng.choice(self.sets)
        work = self.scratch / "case"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        groups = Path(f"{src}.comm_groups.json")
        if groups.exists():
            shutil.copy(groups, work / "m.comm_groups.json")
        donor_src, donor_npus = self.rng.choice(self.sets)
        donor = Path(f"{donor_src}.{self.rng.randrange(donor_npus)}.et").read_bytes()
        victims = set(self.rng.sample(range(npus), min(npus, self.rng.choice([1, 1, 1, 2]))))
        labels = []
        for r in range(npus):
            data = Path(f"{src}.{r}.et").read_bytes()
            if r in victims:
                for _ in range(self.rng.randint(1, 3)):
                    data, label = mutate(self.rng, data, donor)
                    labels.append(label)
            write_bytes(work / f"m.{r}.et", data)
        self.mutations.update(labels)
        prefix = str(work / "m")
        victim = f"{prefix}.{min(victims)}.et"
        self.check("reader", lambda: self.reader_agrees(victim), work, src, labels)
        self.check("validate", lambda: self.validate(prefix), work, src, labels)
        self.check("simulate", lambda: self.simulate(prefix, npus), work, src, labels)
        self.cases += 1

    @staticmethod
    def reader_agrees(path: str) -> None:
        """Both readers refuse the file (the strict reader's error propagates) or both read the same."""
        try:
            _, nodes = read_trace(path)
        except TraceFormatError:
            if _graph_accepts(path):
                raise AssertionError("read_trace refused the file but load_graph accepted it") from None
            raise
        g = load_graph(path)
        if g.ids.tolist() != [n.id for n in nodes] or len(g.data_ids) != sum(len(n.data_deps) for n in nodes):
            raise AssertionError("load_graph and read_trace disagree on ids or data deps")

    @staticmethod
    def validate(prefix: str) -> str:
        from chakra_pipe.validate.validator import validate_set

        return "findings" if validate_set(prefix).errors else "ok"

    def simulate(self, prefix: str, npus: int) -> None:
        from chakra_pipe.sim import simulate

        simulate(TraceSet.load(prefix), self.hardware(npus))

    def check(self, verb: str, fn, work: Path, src: Path, labels: list[str]) -> None:
        signal.signal(signal.SIGALRM, _expire)
        signal.alarm(self.args.timeout)
        problem = None
        try:
            self.outcomes[f"{verb}:{fn() or 'ok'}"] += 1
        except ChakraPipeError as exc:
            self.outcomes[f"{verb}:exit{exc.exit_code}"] += 1
            if exc.exit_code not in (1, 2, 3) or not exc.file or "\n" in exc.line():
                problem = f"bad error: exit {exc.exit_code}: {exc.line()!r}"
        except Expired:
            problem = f"still running after {self.args.timeout} s"
        except Exception:  # noqa: BLE001 -- every other exception is the finding we are looking for
            problem = traceback.format_exc()
        finally:
            signal.alarm(0)
        peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20)
        if problem is None and peak_gb > self.args.memory_gb:
            problem = f"peak RSS {peak_gb:.1f} GB exceeds {self.args.memory_gb} GB"
        if problem:
            self.found += 1
            self.outcomes[f"{verb}:FINDING"] += 1
            keep = self.args.out / f"{self.found:04d}-{verb}"
            shutil.copytree(work, keep, dirs_exist_ok=True)
            write_text(keep / "what.txt", f"source: {src}\nmutations: {', '.join(labels)}\n\n{problem}\n")
            print(f"FINDING {keep}: {verb}: {problem.strip().splitlines()[-1]}", flush=True)

    def report(self, elapsed: float) -> None:
        print(f"{self.cases} cases in {elapsed:.0f} s ({self.cases / max(elapsed, 1e-9):.1f} cases/s), "
              f"{self.found} finding(s)", flush=True)
        print("  outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items())), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="how long to fuzz (default 10)")
    ap.add_argument("--seed", type=int, default=1, help="random seed: the same seed replays the same cases")
    ap.add_argument("--timeout", type=int, default=30, help="seconds per verb before a case counts as a hang")
    ap.add_argument("--memory-gb", type=float, default=4.0, help="peak resident memory allowed")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "fuzz-findings",
                    help="where failing cases are kept (default: benchmarks/out/fuzz-findings, git-ignored)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="chakra-fuzz-") as tmp:
        fuzzer = Fuzzer(args, Path(tmp))
        start = last = time.monotonic()
        end = start + args.minutes * 60
        while time.monotonic() < end:
            fuzzer.case()
            if time.monotonic() - last >= 60:
                fuzzer.report(time.monotonic() - start)
                last = time.monotonic()
        fuzzer.report(time.monotonic() - start)
        print("  mutations: " + ", ".join(f"{k} {v}" for k, v in sorted(fuzzer.mutations.items())))
    return 1 if fuzzer.found else 0


if __name__ == "__main__":
    sys.exit(main())
