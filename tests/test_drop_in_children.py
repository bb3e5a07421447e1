"""`python -m plax` reaches the Python processes a program starts: each resolves `jax` to plax.

The program (tests/jax_programs/child_processes.jaxpy) is JAX code; each child it starts
prints which module `jax` gave it.
"""
import os
import subprocess
import sys

import pytest

from test_drop_in import PROGRAMS, REPO, run_python

CHILDREN = os.path.join(PROGRAMS, "child_processes.jaxpy")
HOOK_DIR = os.path.join(REPO, "src", "plax", "_startup")
WORK = "['plax 0.0', 'plax 1.0', 'plax 3.0']"


@pytest.mark.parametrize("kind, want", [
    ("spawn", f"spawn {WORK}"),
    ("forkserver", f"forkserver {WORK}"),
    ("executor", f"executor {WORK}"),
    ("subprocess", "subprocess 0 child: plax.numpy 6.0"),
])
def test_child_processes_resolve_jax_to_plax(kind, want, tmp_path):
    proc = run_python(["-m", "plax", CHILDREN, kind], tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["parent: plax.numpy 3.0", want], proc.stdout


def test_the_launcher_and_its_grandchildren_resolve_jax_to_plax(tmp_path):
    # launch -> python -m plax (process 0) -> a plain `python script spawn` -> a spawn pool
    proc = run_python(["-m", "plax.distributed.launch", "-n", "1", "--timeout", "200",
                       CHILDREN, "nested"], tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.splitlines()[:3] == [
        "[0] parent: plax.numpy 3.0", "[0] nested 0 parent: plax.numpy 3.0", f"[0] spawn {WORK}"]


def test_a_process_started_without_python_m_plax_is_untouched(tmp_path):
    proc = run_python(["-c", "import os, sys, importlib.util as u; "
                             "print(os.environ.get('PYTHONPATH', '').count('_startup'), "
                             "'sitecustomize' in sys.modules and "
                             "'plax' in (sys.modules['sitecustomize'].__file__ or ''), "
                             "any('Plax' in type(f).__name__ or 'Jax' in getattr(f, '__name__', '')"
                             " for f in sys.meta_path))"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "False", "False"]


def test_a_child_that_never_imports_jax_never_imports_plax(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HOOK_DIR, os.path.join(REPO, "src")]))
    out = subprocess.run([sys.executable, "-c", "import sys; print('plax' in sys.modules)"],
                         env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.split() == ["False"], out.stderr


def test_the_interpreters_own_sitecustomize_still_runs_under_the_hook(tmp_path):
    own = tmp_path / "site_dir"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['OWN_HOOK_RAN'] = 'yes'\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [HOOK_DIR, str(own), os.path.join(REPO, "src")]))
    code = ("import os, jax, jax.numpy as jnp; "
            "print(os.environ.get('OWN_HOOK_RAN'), jax.__name__, float(jnp.ones(2).sum()))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["yes", "plax", "2.0"]
