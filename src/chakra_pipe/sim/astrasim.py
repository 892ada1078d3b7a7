"""Drop-in ``AstraSim_Analytical_Congestion_Unaware`` / ``_Aware`` console scripts.

ASTRA-sim users keep their run scripts: the binary name fixes the backend, flags are ASTRA-sim's
(``CmdLineParser.cc``, ``--flag=value`` or ``--flag value``), unknown flags and stray arguments are
ignored with a warning (ASTRA-sim accepts them silently), and the output is ASTRA-sim's spdlog
lines — ``sys[i] finished, ...`` followed by the statistics lines — on stdout, with the same lines at
debug level appended to ``<logging-folder>/log.log`` and errors to ``err.log``.

A setting that ASTRA-sim reads but this simulator does not model is never silently dropped: it
prints one warning naming it (``--logging-configuration``, ``trace-enabled``, ``track-local-mem``,
``--compute-scale``/``--comm-scale`` other than 1, which ASTRA-sim itself stores and never uses).
``--injection-scale`` multiplies ``endpoint-delay`` when that key is present, as in ASTRA-sim.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..errors import EXIT_INPUT, ChakraPipeError, ConfigError, InputError
from ..readfile import read_json
from .backends import AWARE, BACKENDS, DEFAULT, UNAWARE
from .config import IGNORED_SYSTEM_KEYS, MODELLED_SYSTEM_KEYS
from .result import finished_line

PROGRAMS = {b.name: b.program for b in BACKENDS}
# flag -> (kind, default); kinds: path, str, int, float, bool (CmdLineParser.cc)
FLAGS: dict[str, tuple[str, object]] = {
    "workload-configuration": ("str", None),
    "comm-group-configuration": ("str", "empty"),
    "system-configuration": ("str", None),
    "remote-memory-configuration": ("str", None),
    "network-configuration": ("str", None),
    "logging-configuration": ("str", "empty"),
    "logging-folder": ("str", "log"),
    "num-queues-per-dim": ("int", 1),
    "compute-scale": ("float", 1.0),
    "comm-scale": ("float", 1.0),
    "injection-scale": ("float", 1.0),
    "rendezvous-protocol": ("bool", False),
}
REQUIRED = ("workload-configuration", "system-configuration", "network-configuration")
_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}


@dataclass
class Options:
    values: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)  # raised once the log folder is known

    def check(self) -> None:
        if self.errors:
            raise self.errors[0]


def _convert(name: str, kind: str, text: str) -> object:
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
    except ValueError:
        raise InputError(
            f"expected {'an integer' if kind == 'int' else 'a number'}, got {text!r}", where=f"--{name}"
        ) from None
    if kind == "bool":
        low = text.lower()
        if low not in _TRUE | _FALSE:
            raise InputError(f"expected true or false, got {text!r}", where=f"--{name}")
        return low in _TRUE
    return text


def parse_flags(argv: list[str]) -> Options:
    """ASTRA-sim's command line: known flags typed, everything else reported and skipped."""
    values = {name: default for name, (_, default) in FLAGS.items()}
    warnings: list[str] = []
    errors: list[InputError] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if not tok.startswith("--") or tok == "--":
            warnings.append(f"ignoring positional argument {tok!r}")
            continue
        name, eq, text = tok[2:].partition("=")
        if name not in FLAGS:
            warnings.append(f"ignoring unknown flag --{name}")
            continue
        kind = FLAGS[name][0]
        if not eq:
            if kind == "bool":
                text = "true"
            elif i < len(argv):
                text, i = argv[i], i + 1
            else:
                errors.append(InputError("needs a value", where=f"--{name}"))
                continue
        try:
            values[name] = _convert(name, kind, text)
        except InputError as exc:
            errors.append(exc)
    missing = [f"--{n}" for n in REQUIRED if values[n] is None]
    if missing:
        errors.append(InputError(f"required flag(s) missing: {', '.join(missing)}"))
    return Options(values, warnings, errors)


def _fmt_double(x: float) -> str:
    """fmt's ``{}`` for a double: shortest round trip, no trailing ``.0``."""
    return str(int(x)) if x.is_integer() and abs(x) < 1e16 else repr(x)


class Log:
    """spdlog-style lines: ``[time] [logger] [level] message`` to the console and ``log.log``.

    ``log.log`` and ``err.log`` are appended to, as spdlog's file sinks do, so one folder can hold
    several runs (the conformance log is 111 runs in one file).
    """

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)
        self._log: IO[str] | None = None
        self._err: IO[str] | None = None
        self._files = contextlib.ExitStack()
        self._closed: set[int] = set()  # consoles whose reader went away (`| head`)

    def open(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._log = self._files.enter_context(open(self.folder / "log.log", "a", encoding="utf-8"))  # noqa: SIM115
        self._err = self._files.enter_context(open(self.folder / "err.log", "a", encoding="utf-8"))  # noqa: SIM115

    def close(self) -> None:
        self._files.close()

    def __call__(self, logger: str, level: str, message: str, console: IO[str] | None = None) -> None:
        stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        line = f"[{stamp}] [{logger}] [{level}] {message}\n"
        if console is not None and id(console) not in self._closed:
            try:
                console.write(line)
            except BrokenPipeError:  # the files still get every line and the exit status stays
                self._closed.add(id(console))
        if self._log is not None:
            self._log.write(line)
        if self._err is not None and level in ("error", "critical"):
            self._err.write(line)


def _not_modelled(opts: Options, hw) -> list[str]:
    v, out = opts.values, []
    if v["logging-configuration"] != "empty":
        out.append(
            f"--logging-configuration={v['logging-configuration']}: spdlog TOML configurations are not "
            "read; log.log gets every level, err.log errors only"
        )
    for name in ("compute-scale", "comm-scale"):
        if v[name] != 1.0:
            out.append(f"--{name}={_fmt_double(v[name])} has no effect (ASTRA-sim parses it and never uses it)")
    if v["injection-scale"] != 1.0 and not hw.system.endpoint_delay_given:
        out.append(
            "--injection-scale has no effect: it multiplies endpoint-delay, which the system file "
            "does not set (as in ASTRA-sim)"
        )
    raw = read_json(v["system-configuration"], error=ConfigError)
    for key in sorted(raw):
        if key in IGNORED_SYSTEM_KEYS and raw[key] != IGNORED_SYSTEM_KEYS[key]:
            out.append(f"system key {key}={raw[key]!r} has no effect (ASTRA-sim does not read it either)")
        elif key not in MODELLED_SYSTEM_KEYS and key not in IGNORED_SYSTEM_KEYS:
            out.append(f"unknown system key {key!r} ignored (ASTRA-sim ignores keys it does not know)")
    if hw.system.trace_enabled:
        out.append(
            "trace-enabled=1: per-node issue/callback debug lines are not written (use "
            "`chakra-pipe simulate --timeline` for a per-node trace)"
        )
    if hw.system.track_local_mem:
        out.append(
            f"track-local-mem=1: local memory usage is not tracked; no peak-memory line and no "
            f"{hw.system.local_mem_trace_filename!r} file are written"
        )
    return out


def run(argv: list[str], backend: str, stdout: IO[str] = sys.stdout, stderr: IO[str] = sys.stderr) -> int:
    from ..et.traceset import TraceSet, load_comm_groups
    from . import load_hardware, simulate
    from .stats import rank_statistics

    prog = PROGRAMS[backend]
    if any(a in ("-h", "--help") for a in argv):
        stdout.write(
            f"usage: {prog} " + " ".join(f"--{n}=…" for n in FLAGS) + "\n"
            "ASTRA-sim-compatible analytical simulation (chakra-pipe); unknown flags are ignored.\n"
        )
        return 0
    log = Log("log")
    try:
        opts = parse_flags(argv)
        log = Log(str(opts.values["logging-folder"]))
        log.open()
        for w in opts.warnings:
            log("astra-sim", "warning", w, stderr)
        opts.check()
        v = opts.values
        hw = load_hardware(
            v["system-configuration"],
            v["network-configuration"],
            v["remote-memory-configuration"],
            backend=backend,
            num_queues_per_dim=v["num-queues-per-dim"],
            injection_scale=v["injection-scale"],
            rendezvous=v["rendezvous-protocol"],
        )
        for w in _not_modelled(opts, hw):
            log("astra-sim", "warning", w, stderr)
        cg = str(v["comm-group-configuration"])
        # ASTRA-sim treats any path containing "empty" as "no groups"; so do we, as a drop-in.
        groups = {} if "empty" in cg else load_comm_groups(cg)
        ts = TraceSet.load(str(v["workload-configuration"]))
        res = simulate(ts, hw, comm_groups=groups, comm_groups_file=None if "empty" in cg else cg)
        for st in rank_statistics(res, hw.system):
            for p in st.roofline_nodes:
                log(
                    "workload",
                    "debug",
                    f"operation_intensity={_fmt_double(p.operation_intensity)}, "
                    f"perf={_fmt_double(p.perf)}, elapsed_time={_fmt_double(p.elapsed_s)} "
                    f"compute_utilization={_fmt_double(p.compute_utilization)} "
                    f"memory_utilization={_fmt_double(p.memory_utilization)} tensor_size={p.tensor_size} "
                    f"num_ops={p.num_ops}",
                )
            log(
                "workload",
                "info",
                finished_line(st.rank, st.finish_ns, st.exposed_comm_ns),
                stdout,
            )
            for line in st.lines():
                log("statistics", "info", line, stdout)
        log("system", "warning", "Exiting", stdout)
        return 0
    except ChakraPipeError as exc:
        for rank, (t, x) in getattr(exc, "finished", {}).items():  # a stopped run: as upstream, in finish order
            log("workload", "info", finished_line(rank, t, x), stdout)
        log("astra-sim", "error", exc.line(), stderr)
        return exc.exit_code
    except (OSError, ValueError, RecursionError, MemoryError) as exc:
        log("astra-sim", "error", str(exc) or type(exc).__name__, stderr)
        return EXIT_INPUT
    finally:
        log.close()
        try:
            stdout.flush()
        except BrokenPipeError:  # `| head`: the logs above are written; the exit status stays
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _main(args: list[str], backend: str) -> None:
    """The drop-in program: as ``chakra-pipe simulate``, its run lives until the process ends, so the
    collector stays off through it and leaves what is alive at exit alone (``lifecycle``; ~20 ms of a
    64-rank run, issue #15)."""
    from ..lifecycle import one_shot

    with one_shot():
        code = run(args, backend)
    sys.exit(code)


def main_unaware() -> None:
    _main(sys.argv[1:], UNAWARE.name)


def main_aware() -> None:
    _main(sys.argv[1:], AWARE.name)


if __name__ == "__main__":  # python -m chakra_pipe.sim.astrasim [--backend=congestion_aware] FLAGS…
    args = sys.argv[1:]
    chosen = DEFAULT
    if args and args[0].startswith("--backend="):
        chosen = args.pop(0).partition("=")[2]
    if chosen not in PROGRAMS:
        print(f"unknown backend {chosen!r} (expected {' or '.join(PROGRAMS)})", file=sys.stderr)
        sys.exit(EXIT_INPUT)
    _main(args, chosen)
