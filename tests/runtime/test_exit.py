"""Exiting while daemon threads still call into XLA is clean (JAX aborts there)."""
import os

import pytest

from test_drop_in import PROGRAMS, run_python


@pytest.mark.parametrize("loops", ["all", "jit"])
def test_exit_while_daemon_threads_dispatch_is_clean(loops, tmp_path):
    proc = run_python(["-m", "plax", os.path.join(PROGRAMS, "exit_with_daemon_threads.jaxpy"),
                       loops], tmp_path, timeout=120)
    assert "exception not rethrown" not in proc.stderr
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["main exits", "exit handler: 6.0"]
