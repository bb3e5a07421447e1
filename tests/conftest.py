"""Test set-up: 8 virtual CPU devices, so multi-device code is always exercised."""
import atexit
import os
import shutil
import sys
import tempfile

import pytest

os.environ.setdefault("PLAX_NUM_CPU_DEVICES", "8")
# The persistent compilation cache stays on, in a directory of this session's (subprocesses
# inherit it), never the user's.
os.environ["PLAX_CACHE_DIR"] = tempfile.mkdtemp(prefix="plax-test-cache-")
os.environ.pop("PLAX_COMPILATION_CACHE_DIR", None)
atexit.register(shutil.rmtree, os.environ["PLAX_CACHE_DIR"], True)
sys.path.insert(0, os.path.dirname(__file__))  # for `import helpers`


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "distributed_slow: a slower multi-process test, run by `make distributed` "
                   "(`make test` runs the fast ones)")
    config.addinivalue_line(
        "markers", "gpu: needs an NVIDIA GPU (the CUDA plugin): run by `make gpu` and "
                   "bench/gpu_check.sh; `make test` leaves them out, and without a GPU they skip")
    config.addinivalue_line(
        "markers", "tpu: needs a real TPU (libtpu and a chip): run by `make tpu` and "
                   "bench/tpu_check.sh; `make test` deselects them, and without a TPU they fail")
    config.addinivalue_line(
        "markers", "needs_devices(n): the test builds meshes or maps over n devices; in a run "
                   "with fewer (the suite's one-device run of the sharding and pmap tests) it is "
                   "deselected, never skipped. The closest mark wins, so a test in a module "
                   "marked needs_devices(8) can say needs_devices(1).")
    config.addinivalue_line(
        "markers", "slow: a slower integration run (whole JAX programs, library programs, test "
                   "files again through the jax alias) whose checks the unit tests also make, "
                   "or a test listed in tests/slow_tests.txt (2 s or more): run by `make "
                   "slow`; `make test` deselects them and runs a fast subset")


def _listed_slow() -> set:
    path = os.path.join(os.path.dirname(__file__), "slow_tests.txt")
    with open(path) as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by mark
def pytest_collection_modifyitems(config, items):
    """Mark slow the tests listed in slow_tests.txt; deselect the tests marked needs_devices(n)
    when fewer than n devices exist."""
    slow = _listed_slow()
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)
    wants = {item: item.get_closest_marker("needs_devices") for item in items}
    if not any(wants.values()):
        return
    import plax
    have = plax.device_count()
    dropped = [item for item, mark in wants.items() if mark is not None and mark.args[0] > have]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        gone = set(dropped)
        items[:] = [item for item in items if item not in gone]


def pytest_runtest_call(item):
    """A test marked tpu fails at once, saying why, where plax's default backend is no TPU (such
    tests are deselected where no TPU is, never skipped)."""
    if item.get_closest_marker("tpu") is None:
        return
    import plax
    backend = plax.default_backend()
    if backend != "tpu":
        pytest.fail(f"no TPU: plax's default backend is {backend!r} ({plax.devices()}); this "
                    "test needs a TPU chip and libtpu (pip install 'plax[tpu]'). `make test` "
                    "deselects it.", pytrace=False)
