"""os.fork() after plax started: a warning as JAX gives, and a child that keeps working."""
import os

from test_drop_in import PROGRAMS, run_python


def test_fork_warns_and_the_child_runs_compiled_programs_and_refuses_new_compiles(tmp_path):
    proc = run_python(["-m", "plax", os.path.join(PROGRAMS, "fork_after_start.jaxpy")],
                      tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [
        "[0.0, 2.0, 4.0]",
        "child [[0.0, 2.0, 4.0], [1.0, 1.0], [0.0, 1.0, 2.0], "
        "'plax cannot compile a new program in this process: it was ']",
        "[('RuntimeWarning', 'os.fork() was called. os.fork() is incompatible with "
        "multithreaded code, and plax (as JAX)')]"]


def test_a_fork_before_any_backend_started_neither_warns_nor_refuses(tmp_path):
    code = ("import os, warnings\n"
            "warnings.simplefilter('error')\n"
            "import plax, plax.numpy as jnp\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    print('child', float(jnp.arange(5.0).sum()), flush=True)\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n"
            "print('parent', float(jnp.arange(3.0).sum()))\n")
    proc = run_python(["-c", code], tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["child 10.0", "parent 3.0"]
