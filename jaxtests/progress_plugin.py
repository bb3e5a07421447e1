"""A pytest plugin that writes each case's outcome as it ends (``PLAX_JAXTESTS_PROGRESS``), so
that a run that a crash cuts short can go on past the case that crashed (``run.py``).

The file gets ``start<TAB>id`` before a case runs and ``<outcome><TAB>id`` when it ends (ids as
``run.read_report`` spells them: ``Class::test``). A later run given the same file leaves out
every case the file names: what ran, and the case that started and never ended. On a chip,
libtpu aborts the whole process on some programs; JUnit's report is then never written.
"""
from __future__ import annotations

import os

_OUTCOME = {"passed": "passed", "failed": "failed", "skipped": "skipped"}


def _id(nodeid: str) -> str:
    parts = nodeid.split("::")
    module = os.path.splitext(os.path.basename(parts[0]))[0]
    return f"{parts[1] if len(parts) > 2 else module}::{parts[-1]}"


def read(path: str) -> tuple[dict[str, str], list[str]]:
    """The outcomes recorded in a progress file, and the ids that started but never ended."""
    outcomes, started = {}, []
    if not os.path.exists(path):
        return outcomes, started
    with open(path) as f:
        for line in f:
            kind, _, case = line.rstrip("\n").partition("\t")
            if kind == "start":
                started.append(case)
            elif case:
                outcomes[case] = kind
    return outcomes, [c for c in started if c not in outcomes]


def _write(kind: str, nodeid: str) -> None:
    path = os.environ.get("PLAX_JAXTESTS_PROGRESS")
    if path:
        with open(path, "a") as f:
            f.write(f"{kind}\t{_id(nodeid)}\n")
            f.flush()
            os.fsync(f.fileno())


def pytest_collection_modifyitems(config, items):
    path = os.environ.get("PLAX_JAXTESTS_PROGRESS")
    if not path:
        return
    outcomes, crashed = read(path)
    seen = set(outcomes) | set(crashed)
    drop = [item for item in items if _id(item.nodeid) in seen]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [item for item in items if _id(item.nodeid) not in seen]


def pytest_runtest_logstart(nodeid, location):
    _write("start", nodeid)


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        outcome = _OUTCOME[report.outcome]
        if report.when != "call" and outcome == "failed":
            outcome = "error"
        _write(outcome, report.nodeid)
