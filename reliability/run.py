"""`make reliability`: plax under threads, long runs, cache faults, interrupts, errors,
child processes and exits, each case in a process of its own (so a crash is a result).

    python reliability/run.py [--jax PYTHON] [--only threads,memory] [--quick] [--markdown FILE]

Each case is a JAX program in ``reliability/cases/`` run with ``python -m plax`` (``jax``
resolving to plax) and, given the Python of a scratch virtual environment holding real JAX
(``--jax``, or the ``JAX_PYTHON`` variable), under JAX as well. A case prints
``RESULT: ok: ...`` or ``RESULT: FAIL: ...`` as its last line; the runner also reports a
case that crashes (killed by a signal), hangs (past its time limit) or fails with an
error. One line per case: plax's outcome and time, JAX's, then what plax's run said.
``--quick`` runs smaller sizes (the subset ``make test`` runs uses it).
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
CASES_DIR = os.path.join(HERE, "cases")
SRC = os.path.join(os.path.dirname(HERE), "src")


@dataclass(frozen=True)
class Case:
    name: str
    program: str  # cases/<program>.jaxpy
    arg: str
    limit_s: int  # past this the case hangs
    fast: bool  # in `make test` (with --quick)


CASES = [
    Case("threads-dispatch", "threads", "dispatch", 300, True),
    Case("threads-trace", "threads", "trace", 300, False),
    Case("threads-transforms", "threads", "transforms", 300, True),
    Case("memory-dispatch", "memory", "dispatch", 300, False),
    Case("memory-compiles", "memory", "compiles", 600, False),
    Case("memory-arrays", "memory", "arrays", 300, False),
    Case("memory-host-reads", "memory", "reads", 600, True),
    Case("memory-training-loop", "memory", "training", 300, True),
    Case("cache-corrupt", "cache", "corrupt", 300, True),
    Case("cache-4-processes", "cache", "concurrent", 600, False),
    Case("cache-read-only", "cache", "readonly", 300, False),
    Case("cache-path-is-file", "cache", "file", 300, False),
    Case("interrupt-compute", "interrupt", "compute", 300, False),
    Case("interrupt-trace", "interrupt", "trace", 300, True),
    Case("resource-exhausted", "errors", "oom", 300, True),
    Case("debug-nans", "errors", "nans", 300, True),
    Case("deep-recursion", "errors", "recursion", 300, True),
    Case("fork-child", "children", "fork", 300, False),
    Case("spawn-children", "children", "spawn", 300, False),
    Case("forkserver-children", "children", "forkserver", 300, False),
    Case("exit-pending", "exit", "pending", 300, True),
    Case("exit-daemon-threads", "exit", "daemon", 300, False),
]


@dataclass
class Outcome:
    status: str  # ok, FAIL, crash, hang, error
    secs: float
    detail: str


def run_case(case: Case, python: str, as_plax: bool, quick: bool = False) -> Outcome:
    """Run one case in a new process: plax's (``python -m plax``) or real JAX's."""
    program = os.path.join(CASES_DIR, case.program + ".jaxpy")
    cmd = [python, *(["-m", "plax"] if as_plax else []), program, case.arg,
           *(["--quick"] if quick else [])]
    env = dict(os.environ)
    if as_plax:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    else:  # nothing of plax's reaches a JAX run
        env.pop("PYTHONPATH", None)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=CASES_DIR, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=case.limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return Outcome("hang", time.monotonic() - start, f"killed after {case.limit_s} s")
    secs = time.monotonic() - start
    said = [line for line in out.splitlines() if line.startswith("RESULT: ")]
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        last = (err.strip().splitlines() or [""])[-1]
        return Outcome("crash", secs, f"{name}" + (f" ({last})" if last else ""))
    if said:
        status, _, detail = said[-1][len("RESULT: "):].partition(": ")
        if status == "ok" and proc.returncode == 0:
            return Outcome("ok", secs, detail)
        return Outcome("FAIL", secs, detail if status != "ok" else
                       f"exit status {proc.returncode} after: {detail}")
    last = (err.strip().splitlines() or [f"exit status {proc.returncode}, nothing said"])[-1]
    return Outcome("error", secs, last)


def _cell(o: Outcome | None) -> str:
    return "-" if o is None else f"{o.status} {o.secs:.1f}s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jax", default=os.environ.get("JAX_PYTHON"),
                    help="the Python of a virtual environment with real JAX installed")
    ap.add_argument("--only", help="comma-separated case names or prefixes")
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--markdown", help="also write the table to this file")
    args = ap.parse_args(argv)
    cases = CASES
    if args.only:
        wanted = args.only.split(",")
        cases = [c for c in CASES if any(c.name.startswith(w) for w in wanted)]
    print(f"{'case':22} {'plax':12} {'JAX':12} what plax's run said", flush=True)
    rows, failed = [], 0
    for case in cases:
        mine = run_case(case, sys.executable, True, args.quick)
        theirs = run_case(case, args.jax, False, args.quick) if args.jax else None
        failed += mine.status != "ok"
        print(f"{case.name:22} {_cell(mine):12} {_cell(theirs):12} {mine.detail}", flush=True)
        if theirs is not None and theirs.status != "ok":
            print(f"{'':22} {'':12} {'':12} JAX: {theirs.detail}", flush=True)
        rows.append((case, mine, theirs))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| case | plax | JAX 0.10.2 | plax's run | JAX's run |\n"
                    "|---|---|---|---|---|\n")
            for case, mine, theirs in rows:
                f.write(f"| {case.name} | {_cell(mine)} | {_cell(theirs)} | {mine.detail} | "
                        f"{'' if theirs is None else theirs.detail} |\n")
    print(f"{len(cases) - failed} of {len(cases)} cases ok on plax", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
