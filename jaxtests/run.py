"""`make jaxtests JAX_TESTS=<dir>`: JAX's own test files, run on plax.

    python jaxtests/run.py --tests DIR [--reference] [--only fft,lax_numpy] [--timeout S]

Each ``*_test.py`` file in DIR runs in its own pytest process with ``jax`` resolving to plax
(``python -m plax -m pytest``), on 8 CPU devices and with ``JAX_NUM_GENERATED_CASES`` fixed
(``CASES`` below), so that the parameterized cases are the ones JAX's run generates. The
table gives, per file, how many of the cases that pass on real JAX 0.10.2 pass on plax.

Every case's outcome is written to ``RESULTS/<file>.json`` (``--results``, default
``/tmp/plax-jaxtests``), so that ``--score`` can print the table again without running
anything (after a reference file has been added, for instance), and the failures can be read.

``--reference`` runs the files on real JAX instead (the Python named by ``JAX_PYTHON``, with
JAX 0.10.2 installed, outside this repository) and writes the ids of the cases that pass to
``jaxtests/reference/<file>.txt``: the data a plax run is scored against, kept in the
repository (test ids only, nothing of the files themselves).

``--platform tpu`` runs the files on the chip (and the host's CPU beside it) instead of 8 virtual
CPU devices, scored against ``jaxtests/reference/tpu/``, written by real JAX on the same chip.
``--sample tpu_pallas_test=8`` keeps one case in 8 of that file (the same cases on both sides:
``sample_plugin.py``), and ``--together`` runs all the files in one pytest process (a chip costs
seconds to open per process; a crash then loses every file's report, so it suits real JAX).
``--as-tpu`` runs plax's side on the CPU as if on a TPU v5e (``cpu_as_tpu_plugin.py``): each
compiled kernel is built into its Mosaic module, then interpreted. A file whose process crashes
(libtpu aborts on some programs) is run on past the case that crashed (``progress_plugin.py``).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _plugin(name: str):
    """One of this folder's pytest plugins (which pytest also loads by name from here)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "jaxtests" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sample_plugin = _plugin("sample_plugin")
progress_plugin = _plugin("progress_plugin")
REFERENCE = ROOT / "jaxtests" / "reference"
CASES = "10"  # JAX_NUM_GENERATED_CASES, JAX's own default
DEVICES = "8"


def test_files(directory: pathlib.Path, only: list[str] | None) -> list[pathlib.Path]:
    files = sorted(directory.glob("*_test.py"))
    if only:
        files = [f for f in files if any(f.stem == o or f.stem == o + "_test" for o in only)]
    return files


def environment(reference: bool, platform: str = "cpu", sample: str = "") -> dict:
    env = dict(os.environ, JAX_NUM_GENERATED_CASES=CASES, PYTHONDONTWRITEBYTECODE="1",
               PLAX_JAXTESTS_SAMPLE=sample)
    if platform == "cpu":
        env.update(PLAX_NUM_CPU_DEVICES=DEVICES, JAX_PLATFORMS="cpu",
                   XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES}")
    else:  # the accelerator first, the host's one CPU device beside it
        env["JAX_PLATFORMS"] = env["PLAX_PLATFORMS"] = f"{platform},cpu"
    paths = [*filter(None, [os.environ.get("PYTHONPATH")]), str(ROOT / "jaxtests")]
    if not reference:  # plax from this checkout
        paths.insert(0, str(ROOT / "src"))
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def as_jax_id(test_id: str) -> str:
    """A plax case's id as JAX's run names the same case: some ids are built from a function's
    ``__module__``, "plax.numpy" where JAX's is "jax.numpy"."""
    return test_id.replace("plax.", "jax.")


def run_file(path: pathlib.Path, reference: bool, timeout: float, platform: str = "cpu",
             sample: str = "", others: tuple = (), as_tpu: bool = False) -> tuple[dict, float, str]:
    """The outcome of every case of one file (id -> passed, failed, error or skipped), the
    seconds it took, and a note (a timeout, or a file that did not collect). With ``others``
    (files of the same folder), they run in the same process, and the ids are those of
    ``run_together``. A run of one file that crashes (libtpu aborts on some programs) goes on
    in a new process past the case that crashed, which counts as failed (``progress_plugin``),
    while time is left."""
    python = os.environ.get("JAX_PYTHON") if reference else sys.executable
    if reference and not python:
        sys.exit("--reference needs JAX_PYTHON: a Python with JAX 0.10.2 installed")
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        progress = pathlib.Path(tmp) / "progress.txt"
        env = environment(reference, platform, sample)
        if not others:
            env["PLAX_JAXTESTS_PROGRESS"] = str(progress)
        crashes = []
        while True:
            report = pathlib.Path(tmp) / "report.xml"
            report.unlink(missing_ok=True)
            returncode, note = _pytest(python, reference, path, others, as_tpu, report, env,
                                       timeout - (time.time() - start))
            if report.exists() and not crashes:
                outcomes = read_report(report, bool(others))
                break
            outcomes, started = progress_plugin.read(str(progress))
            if (returncode in (0, 1) or others or not started
                    or time.time() - start > timeout - 20):
                break
            crashes.append(started[-1])
            with progress.open("a") as f:  # (the crashed case is not run again)
                f.write(f"failed\t{started[-1]}\n")
        if crashes:
            outcomes, _ = progress_plugin.read(str(progress))
            note = (f"{len(crashes)} crash(es), run on past them, first in "
                    f"{crashes[0][:80]}; {note}".rstrip("; "))
    return outcomes, time.time() - start, note


def _pytest(python: str, reference: bool, path: pathlib.Path, others: tuple, as_tpu: bool,
            report: pathlib.Path, env: dict, timeout: float) -> tuple[int, str]:
    """One pytest process over a file (and ``others``): its exit code and a note."""
    command = [python, *([] if reference else ["-m", "plax"]), "-m", "pytest", "-q",
               "-p", "no:cacheprovider", f"--junitxml={report}", "-o",
               "junit_family=xunit1", "-p", "sample_plugin", "-p", "progress_plugin",
               *(["-p", "cpu_as_tpu_plugin"] if as_tpu else []), path.name,
               *(o.name for o in others)]
    if others:  # (a file that does not import must not stop the others)
        command.insert(-1 - len(others), "--continue-on-collection-errors")
    note = ""
    child = subprocess.Popen(command, cwd=path.parent, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = child.communicate(timeout=max(timeout, 1))
        if child.returncode not in (0, 1):
            tail = output.strip().splitlines()[-1:] or [""]
            note = f"exit {child.returncode}: {tail[0][:120]}"
    except subprocess.TimeoutExpired:
        # SIGINT first: pytest then stops and still writes the report of what it ran
        child.send_signal(signal.SIGINT)
        try:
            child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
        note = f"timed out after {timeout:.0f} s"
    return child.returncode, note


def run_together(paths: list[pathlib.Path], reference: bool, timeout: float, platform: str,
                 sample: str) -> tuple[dict, float, str]:
    """Every file in one pytest process: {file stem: outcomes}, the seconds, a note."""
    outcomes, seconds, note = run_file(paths[0], reference, timeout, platform, sample,
                                       tuple(paths[1:]))
    by_file = {p.stem: {} for p in paths}
    for key, outcome in outcomes.items():
        stem, _, case = key.partition(":")
        by_file.setdefault(stem, {})[case] = outcome
    return by_file, seconds, note


def read_report(report: pathlib.Path, with_module: bool = False) -> dict:
    """Outcomes by ``Class::test`` (``module:Class::test`` with ``with_module``)."""
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        if not case.get("name"):  # (what an interrupted run reports of the interruption)
            continue
        module, _, cls = case.get("classname", "").rpartition(".")
        name = f"{cls}::{case.get('name')}"
        if with_module:
            name = f"{module.rsplit('.', 1)[-1]}:{name}"
        kinds = {child.tag for child in case}
        outcome = ("error" if "error" in kinds else "failed" if "failure" in kinds
                   else "skipped" if "skipped" in kinds else "passed")
        outcomes[name] = outcome
    return outcomes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", required=True, type=pathlib.Path,
                        help="a folder of JAX's test files (e.g. ../shared/jax-tests/tests)")
    parser.add_argument("--reference", action="store_true",
                        help="run real JAX (JAX_PYTHON) and write jaxtests/reference/")
    parser.add_argument("--only", help="comma-separated file names (fft or fft_test)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per file")
    parser.add_argument("--results", type=pathlib.Path,
                        default=pathlib.Path(tempfile.gettempdir()) / "plax-jaxtests",
                        help="where each file's outcomes are written (and --score reads them)")
    parser.add_argument("--platform", default="cpu",
                        help="cpu (8 virtual devices), or tpu: the chip (references under "
                             "jaxtests/reference/tpu/)")
    parser.add_argument("--keep-partial", action="store_true",
                        help="with --reference: keep the passing ids of a file that timed out")
    parser.add_argument("--reference-dir", type=pathlib.Path,
                        help="where the references are read and written (default "
                             "jaxtests/reference/, or reference/PLATFORM/ off the CPU)")
    parser.add_argument("--sample", default="",
                        help="keep one case in N of some files: tpu_pallas_test=8,tpu_ops=4")
    parser.add_argument("--as-tpu", action="store_true",
                        help="plax on the CPU as if on a TPU v5e (kernels built for Mosaic, "
                             "then interpreted)")
    parser.add_argument("--together", action="store_true",
                        help="run all the files in one pytest process")
    parser.add_argument("--score", action="store_true",
                        help="print the table from the outcomes of an earlier run")
    args = parser.parse_args(argv)
    files = test_files(args.tests.resolve(), args.only.split(",") if args.only else None)
    reference_dir = args.reference_dir or (
        REFERENCE if args.platform == "cpu" else REFERENCE / args.platform)
    if not files:
        sys.exit(f"no *_test.py files in {args.tests}")
    reference_dir.mkdir(parents=True, exist_ok=True)
    total_ref = total_pass = 0
    print(f"{'file':<36} {'passing':>9} {'of JAX':>7} {'share':>7} {'seconds':>8}  note",
          flush=True)
    args.results.mkdir(parents=True, exist_ok=True)
    sizes = sample_plugin.sample_sizes(args.sample)
    together = None
    if args.together and not args.score:
        together = run_together(files, args.reference, args.timeout, args.platform, args.sample)
    for path in files:
        saved = args.results / f"{path.stem}.json"
        if args.score:
            if not saved.exists():
                print(f"{path.stem:<36} {'(not run)':>25}", flush=True)
                continue
            record = json.loads(saved.read_text())
            outcomes, seconds, note = record["outcomes"], record["seconds"], record["note"]
        else:
            if together:
                outcomes, seconds, note = together[0].get(path.stem, {}), *together[1:]
            else:
                outcomes, seconds, note = run_file(path, args.reference, args.timeout,
                                                   args.platform, args.sample,
                                                   as_tpu=args.as_tpu)
            if path.stem in sizes:
                note = f"(1 case in {sizes[path.stem]}) {note}"
            # (real JAX's outcomes are kept too: where its time went, what it skipped)
            saved.write_text(json.dumps({"outcomes": outcomes, "seconds": seconds,
                                         "note": note}, indent=0, sort_keys=True))
        passed = sorted(i for i, o in outcomes.items() if o == "passed")
        if args.reference:
            if args.keep_partial or "timed out" not in note:
                # (a cut-short run is no reference, unless asked for: then it holds the cases
                # that ran, its first line says so, and so does a score against it)
                header = f"# partial: {note}\n" if "timed out" in note else ""
                if path.stem in sizes:
                    header += f"# sample: 1 case in {sizes[path.stem]}\n"
                (reference_dir / f"{path.stem}.txt").write_text(
                    header + "".join(f"{i}\n" for i in passed))
            print(f"{path.stem:<36} {len(passed):>9} {len(outcomes):>7} {'':>7} "
                  f"{seconds:>8.0f}  {note}", flush=True)
            continue
        ref_file = reference_dir / f"{path.stem}.txt"
        if not ref_file.exists():
            print(f"{path.stem:<36} {'(no reference: run --reference)':>25}", flush=True)
            continue
        lines = ref_file.read_text().splitlines()
        wanted = {line for line in lines if line and not line.startswith("#")}
        for line in lines[:2]:
            if line.startswith(("# partial", "# sample")):
                note = f"(reference {line[2:]}) {note}"
        got = wanted & {as_jax_id(i) for i in passed}
        total_ref += len(wanted)
        total_pass += len(got)
        share = f"{100 * len(got) / len(wanted):.1f}%" if wanted else "-"
        print(f"{path.stem:<36} {len(got):>9} {len(wanted):>7} {share:>7} {seconds:>8.0f}  "
              f"{note}", flush=True)
    if not args.reference and total_ref:
        print(f"{'all':<36} {total_pass:>9} {total_ref:>7} "
              f"{100 * total_pass / total_ref:>6.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
