"""examples/checkpointing.py: a run stopped and resumed from orbax checkpoints ends with the
uninterrupted run's loss, bit for bit."""
import os
import subprocess
import sys

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "examples", "checkpointing.py")


def test_the_resumed_run_ends_with_the_uninterrupted_runs_loss():
    out = subprocess.run([sys.executable, EXAMPLE], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PLAX_NUM_CPU_DEVICES="8"))
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("stopped at step 37") and lines[0].endswith("[20, 30]")
    assert lines[1] == "resumed from step 30; w laid out as P(None, 'model')"
    assert lines[2].endswith("identical: True"), lines[2]
