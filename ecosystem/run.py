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
code blocks of their README instead, each compared with real JAX's output. Libraries whose
packages hold no tests but whose repository does get the test files of a pinned commit of it
(``git fetch``ed into ``.ecosystem-cache/``); on a machine without internet, point
``ECOSYSTEM_GIT_MIRROR`` at local copies of those repositories, a template such as
``/srv/git/{owner}+{name}.git`` that each repository's owner and name fill in.
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
from libraries import DEPENDENCIES, JAX_DEPENDENT, LIBRARIES  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = ROOT / ".ecosystem-cache"
REFERENCE = ROOT / "ecosystem" / "reference"
REPORT = ROOT / "bench" / "ecosystem.md"
PLUGINS = ROOT / "ecosystem" / "plugins"  # pytest plugins a library's pytest_args may name
PROGRAMS = ROOT / "ecosystem" / "programs"  # README examples completed into programs
JAX_PINS = ["jax==0.10.2", "jaxlib==0.10.2"]


# --- environments ---------------------------------------------------------------------------
def venv_for(reference: bool) -> pathlib.Path:
    venv = ROOT / (".venv-ecosystem-jax" if reference else ".venv-ecosystem")
    python = venv / "bin" / "python"
    no_deps = sorted({*JAX_DEPENDENT, *(lib["pip"] for lib in LIBRARIES.values())})
    wanted = "\n".join(sorted([*DEPENDENCIES, *no_deps,
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
    subprocess.run([*pip, "--no-deps", *no_deps], check=True)
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


def git_tests(name: str, url: str, commit: str) -> pathlib.Path:
    """The test files (``*_test.py``, ``test_*.py``, ``conftest.py``, and all of a top-level
    ``tests/`` folder) of ``url`` at ``commit``, and nothing else of it, so that the installed
    package, not the repository's source, is imported."""
    target = CACHE / f"{name}-{commit[:12]}-tests"
    if target.exists():
        return target
    owner, repo = url.rstrip("/").removesuffix(".git").split("/")[-2:]
    source = os.environ.get("ECOSYSTEM_GIT_MIRROR", url).format(owner=owner, name=repo)
    if os.path.isdir(source):  # a local mirror: read straight from it (it may lack blobs
        git = pathlib.Path(source)  # the tests do not need, which a fetch would refuse)
    else:
        git = CACHE / f"{name}-{commit[:12]}.git"
        shutil.rmtree(git, ignore_errors=True)
        subprocess.run(["git", "init", "-q", "--bare", str(git)], check=True)
        subprocess.run(["git", "-C", str(git), "fetch", "-q", "--depth", "1", source, commit],
                       check=True)
    files = subprocess.run(["git", "-C", str(git), "ls-tree", "-r", "--name-only", commit],
                           capture_output=True, text=True, check=True).stdout.split()
    wanted = [f for f in files if f.startswith("tests/") or f.endswith("/conftest.py")
              or f.endswith("_test.py") or f.rsplit("/", 1)[-1].startswith("test_")]
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(git), "archive", commit, "--", *wanted],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(partial)], input=archive, check=True)
    if git.is_relative_to(CACHE):
        shutil.rmtree(git)
    partial.rename(target)
    return target


# --- running a suite ------------------------------------------------------------------------
def environment(lib: dict, reference: bool) -> dict:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = str(PLUGINS)
    env.update(lib.get("env", {}))
    n = lib["devices"]
    if reference:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n}"
    else:
        env["PLAX_NUM_CPU_DEVICES"] = str(n)
    return env


def test_files(root: pathlib.Path, paths: list[str], ignored) -> list[str]:
    files = []
    for path in paths:
        found = [root / path] if (root / path).is_file() else sorted(
            {*(root / path).rglob("*_test.py"), *(root / path).rglob("test_*.py")})
        files += [str(f.relative_to(root)) for f in found]
    return [f for f in files if f not in ignored]


def run_pytest(python, lib: dict, name: str, reference: bool) -> dict:
    kind, *_, paths = lib["tests"]
    if kind == "package":
        root = site_packages(python)
    elif kind == "git":
        root = git_tests(name, *lib["tests"][1:3])
    else:
        root = sdist_root(python, lib["pip"])
    stem = CACHE / f"{name}-{'jax' if reference else 'plax'}"
    xmls, log, tmp = (pathlib.Path(f"{stem}{suffix}") for suffix in ("-xml", ".log", "-tmp"))
    # absltest's temporary directories outlive a run (some tests refuse existing ones)
    for folder in (xmls, tmp):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    env = dict(environment(lib, reference), TEST_TMPDIR=str(tmp))
    ignored = lib.get("ignore", {})
    # A suite written for one process per test file (as Bazel runs it) leaks state from file
    # to file in one process: each of its files gets a pytest of its own.
    runs = [[f] for f in test_files(root, paths, ignored)] if lib.get("file_per_process") \
        else [[*paths, *(arg for f in ignored for arg in ("--ignore", f))]]
    started, timed_out = time.time(), False
    outcomes, causes = {}, collections.Counter()
    with open(log, "w") as out:
        for i, args in enumerate(runs):
            xml = xmls / f"{i}.xml"
            cmd = [str(python), *([] if reference else ["-m", "plax"]), "-m", "pytest", "-q",
                   "-p", "no:cacheprovider", "--rootdir", str(root), f"--junitxml={xml}",
                   "-o", "junit_family=xunit1", "--continue-on-collection-errors",
                   *lib.get("pytest_args", []), *args]
            try:
                out.flush()
                subprocess.run(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                               timeout=max(1, lib["timeout"] - (time.time() - started)))
            except subprocess.TimeoutExpired:
                timed_out = True
            if xml.exists():
                result = parse_junit(xml)
                outcomes.update(result["outcomes"])
                causes.update(result["causes"])
            if timed_out:
                break
    return dict(outcomes=outcomes, causes=dict(causes), seconds=round(time.time() - started),
                timed_out=timed_out)


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
    """Runs a README's code blocks, or the programs ``lib`` names, each in a process of its
    own; a case passes when it exits cleanly (and, in the report, prints what JAX prints)."""
    outcomes, outputs, causes = {}, {}, collections.Counter()
    work = CACHE / f"{name}-readme-{'jax' if reference else 'plax'}"
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    if lib["tests"][0] == "programs":
        cases = {f"program {p}": (PROGRAMS / p).read_text() for p in lib["tests"][1]}
    else:
        cases = {f"README block {i}": block for i, block in enumerate(readme_blocks(python, lib))}
    for i, (test_id, block) in enumerate(cases.items()):
        script = work / f"block_{i}.py"
        script.write_text(block)
        cmd = [str(python), *([] if reference else ["-m", "plax"]), str(script)]
        try:
            proc = subprocess.run(cmd, cwd=work, env=environment(lib, reference),
                                  capture_output=True, text=True, timeout=300)
            ok, out, err = proc.returncode == 0, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired:
            ok, out, err = False, "", "timed out"
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
        runner = run_readme if lib["tests"][0] in ("readme", "programs") else run_pytest
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
