"""`make ecosystem`: libraries built on JAX, run on plax with their own tests.

    python ecosystem/run.py [--reference] [--only optax,chex] [--keep-going]

Sets up a separate virtual environment (``.venv-ecosystem``: plax, the pinned libraries with
``--no-deps`` and their JAX-free dependencies; ``--reference``: ``.venv-ecosystem-jax`` with real
JAX 0.10.2 instead of plax), runs each library's test suite with ``jax`` resolving to plax
(``python -m plax -m pytest``), or under real JAX for the reference, and prints a table:
library, version, passed / failed / errors / skipped, the pass rate over the tests that pass on
real JAX, and the most common failure causes. The reference run writes the tests JAX passes to
``ecosystem/reference/<library>.json`` (committed, so a plax run needs no JAX); the plax run
writes ``bench/ecosystem.md``. Libraries whose published packages hold no tests run the Python
code blocks of their README instead, each compared with real JAX's output.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from libraries import DEPENDENCIES, LIBRARIES  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = ROOT / ".ecosystem-cache"
REFERENCE = ROOT / "ecosystem" / "reference"
REPORT = ROOT / "bench" / "ecosystem.md"
JAX_PINS = ["jax==0.10.2", "jaxlib==0.10.2"]


# --- environments ---------------------------------------------------------------------------
def venv_for(reference: bool) -> pathlib.Path:
    venv = ROOT / (".venv-ecosystem-jax" if reference else ".venv-ecosystem")
    python = venv / "bin" / "python"
    wanted = "\n".join(sorted([*DEPENDENCIES, *{lib["pip"] for lib in LIBRARIES.values()},
                               *(JAX_PINS if reference else ["plax (editable)"])]))
    stamp = venv / ".ecosystem-installed"
    if stamp.exists() and stamp.read_text() == wanted:
        return python
    print(f"setting up {venv.name} ...", flush=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, *(JAX_PINS if reference else ["-e", str(ROOT)])], check=True)
    subprocess.run([*pip, *DEPENDENCIES], check=True)
    subprocess.run([*pip, "--no-deps", *sorted({lib["pip"] for lib in LIBRARIES.values()})],
                   check=True)
    stamp.write_text(wanted)
    return python


def site_packages(python: pathlib.Path) -> pathlib.Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return pathlib.Path(out.stdout.strip())


def sdist_root(python: pathlib.Path, pip_spec: str) -> pathlib.Path:
    """The unpacked source distribution of ``pip_spec`` (downloaded once into the cache)."""
    name, version = pip_spec.split("==")
    target = CACHE / f"{name}-{version}"
    if target.exists():
        return target
    CACHE.mkdir(exist_ok=True)
    subprocess.run([str(python), "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
                    ":all:", "-d", str(CACHE), pip_spec], check=True)
    archive = next(p for p in CACHE.glob("*.tar.gz")
                   if p.name.lower().replace("_", "-").startswith(f"{name.lower()}-{version}"))
    with tarfile.open(archive) as tar:
        tar.extractall(CACHE, filter="data")
    unpacked = next(p for p in CACHE.iterdir() if p.is_dir() and p.name.lower().replace(
        "_", "-") == f"{name.lower()}-{version}")
    if unpacked != target:
        unpacked.rename(target)
    return target


# --- running a suite ------------------------------------------------------------------------
def environment(lib: dict, reference: bool) -> dict:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", JAX_PLATFORMS="cpu")
    env.pop("PYTHONPATH", None)
    env.update(lib.get("env", {}))
    n = lib["devices"]
    if reference:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n}"
    else:
        env["PLAX_NUM_CPU_DEVICES"] = str(n)
    return env


def run_pytest(python, lib: dict, name: str, reference: bool) -> dict:
    kind, paths = lib["tests"]
    if kind == "package":
        root = site_packages(python)
    else:
        root = sdist_root(python, lib["pip"])
    xml = CACHE / f"{name}-{'jax' if reference else 'plax'}.xml"
    CACHE.mkdir(exist_ok=True)
    cmd = [str(python), *([] if reference else ["-m", "plax"]), "-m", "pytest", "-q",
           "-p", "no:cacheprovider", "--rootdir", str(root), f"--junitxml={xml}",
           "-o", "junit_family=xunit1", "--continue-on-collection-errors", *paths]
    for ignored in lib.get("ignore", {}):
        cmd += ["--ignore", ignored]
    started = time.time()
    try:
        subprocess.run(cmd, cwd=root, env=environment(lib, reference), capture_output=True,
                       timeout=lib["timeout"])
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    return dict(parse_junit(xml) if xml.exists() else dict(outcomes={}, causes={}),
                seconds=round(time.time() - started), timed_out=timed_out)


def parse_junit(xml: pathlib.Path) -> dict:
    outcomes, causes = {}, collections.Counter()
    for case in ET.parse(xml).iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        kind = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                kind = {"failure": "failed", "error": "errors", "skipped": "skipped"}[child.tag]
                if kind != "skipped":
                    causes[cause_of(child.get("message") or child.text or "")] += 1
                break
        outcomes[test_id] = kind
    return dict(outcomes=outcomes, causes=dict(causes))


def cause_of(message: str) -> str:
    """A failure message's first line, with numbers and addresses blurred, for grouping."""
    line = next((ln for ln in message.strip().splitlines() if ln.strip()), "")[:160]
    return re.sub(r"0x[0-9a-f]+|\d+(\.\d+)?", "N", line)


def readme_blocks(python, lib: dict) -> list[str]:
    name, version = lib["pip"].split("==")
    dist = next(site_packages(python).glob(f"{name.replace('-', '_')}-{version}.dist-info"))
    text = (dist / "METADATA").read_text()
    return [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "import" in b]


def run_readme(python, lib: dict, name: str, reference: bool) -> dict:
    outcomes, outputs, causes = {}, {}, collections.Counter()
    work = CACHE / f"{name}-readme-{'jax' if reference else 'plax'}"
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    for i, block in enumerate(readme_blocks(python, lib)):
        script = work / f"block_{i}.py"
        script.write_text(block)
        cmd = [str(python), *([] if reference else ["-m", "plax"]), str(script)]
        try:
            proc = subprocess.run(cmd, cwd=work, env=environment(lib, reference),
                                  capture_output=True, text=True, timeout=300)
            ok, out, err = proc.returncode == 0, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired:
            ok, out, err = False, "", "timed out"
        test_id = f"README block {i}"
        outcomes[test_id] = "passed" if ok else "failed"
        outputs[test_id] = out
        if not ok:
            causes[cause_of(err.strip().splitlines()[-1] if err.strip() else "no output")] += 1
    return dict(outcomes=outcomes, outputs=outputs, causes=dict(causes),
                seconds=round(time.time() - started), timed_out=False)


# --- the report -----------------------------------------------------------------------------
def summarise(name: str, result: dict, reference: dict | None) -> dict:
    counts = collections.Counter(result["outcomes"].values())
    row = dict(library=name, version=LIBRARIES[name]["pip"].split("==")[1],
               passed=counts["passed"], failed=counts["failed"], errors=counts["errors"],
               skipped=counts["skipped"], seconds=result["seconds"],
               timed_out=result["timed_out"], causes=sorted(
                   result["causes"].items(), key=lambda kv: -kv[1])[:5])
    if reference is not None:
        good = set(reference["passed"])
        mine = {t for t, k in result["outcomes"].items() if k == "passed"}
        if "outputs" in result:  # README blocks: the output must equal JAX's too
            mine = {t for t in mine if result["outputs"].get(t) == reference["outputs"].get(t)}
        row["reference_passed"] = len(good)
        row["rate"] = len(mine & good) / len(good) if good else None
    return row


def table(rows: list[dict]) -> str:
    head = "| library | version | passed | failed | errors | skipped | of JAX's passes | s |"
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rate = "—" if r.get("rate") is None else \
            f"{r['rate']:.1%} of {r['reference_passed']}"
        lines.append(f"| {r['library']} | {r['version']} | {r['passed']} | {r['failed']} | "
                     f"{r['errors']} | {r['skipped']} | {rate} | {r['seconds']}"
                     f"{' (timed out)' if r['timed_out'] else ''} |")
    return "\n".join(lines)


def causes_text(rows: list[dict]) -> str:
    out = []
    for r in rows:
        if r["causes"]:
            out.append(f"\n**{r['library']}**, most common failure causes:\n")
            out.extend(f"- {n} × `{c}`" for c, n in r["causes"])
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", action="store_true", help="run under real JAX 0.10.2")
    parser.add_argument("--only", default="", help="comma-separated libraries")
    args = parser.parse_args()
    names = [n for n in LIBRARIES if not args.only or n in args.only.split(",")]
    python = venv_for(args.reference)
    rows = []
    for name in names:
        lib = LIBRARIES[name]
        print(f"{name} ...", flush=True)
        runner = run_readme if lib["tests"][0] == "readme" else run_pytest
        result = runner(python, lib, name, args.reference)
        ref_file = REFERENCE / f"{name}.json"
        if args.reference:
            REFERENCE.mkdir(parents=True, exist_ok=True)
            passed = sorted(t for t, k in result["outcomes"].items() if k == "passed")
            ref_file.write_text(json.dumps(dict(passed=passed, outputs=result.get("outputs", {}),
                                                total=len(result["outcomes"])), indent=0) + "\n")
        reference = json.loads(ref_file.read_text()) if ref_file.exists() else None
        rows.append(summarise(name, result, None if args.reference else reference))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    print(causes_text(rows))
    if not args.reference and not args.only:
        REPORT.write_text(
            "# The JAX ecosystem on plax\n\nWritten by `make ecosystem` (`ecosystem/run.py`): "
            "each library's own tests with `jax` resolving to plax; the rate counts the tests "
            "that pass on real JAX 0.10.2 (`make ecosystem ARGS=--reference`).\n\n"
            + table(rows) + "\n" + causes_text(rows) + "\n")


if __name__ == "__main__":
    main()
