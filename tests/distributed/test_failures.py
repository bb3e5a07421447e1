"""Failures of a distributed run are Python errors in bounded time, never hangs or aborts:
a dead peer (process 1, or process 0 which started the coordination service) makes the
survivor raise PeerFailureError naming it within 30 s; a coordinator nobody answers, or a
process that never arrives, makes initialize raise after initialization_timeout; wrong
arguments and a second or late initialize raise JAX's errors. Multi-process cases run
through the launcher on 127.0.0.1, each bounded by its --timeout."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from plax.distributed.launch import free_port

PROGRAMS = Path(__file__).parent / "programs"
BOUND = 30.0  # seconds from a death to the survivor's error (the default heartbeat is 10 s)


def _launch(program, *args, n=2, timeout=90):
    return subprocess.run(
        [sys.executable, "-m", "plax.distributed.launch", "-n", str(n), "--devices-per-process",
         "4", "--timeout", str(timeout), str(PROGRAMS / program), *map(str, args)],
        capture_output=True, text=True, timeout=timeout + 60)


def _python(code, timeout=60):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("victim", [1, pytest.param(0, marks=pytest.mark.distributed_slow)])
def test_a_dead_peer_raises_in_the_survivor_within_the_bound(victim):
    run = _launch("peer_failure.py", victim)
    survivor = 1 - victim
    assert f"[{victim}] DYING" in run.stdout, run.stdout + run.stderr
    assert f"[{survivor}] FIRST 240.0" in run.stdout
    found = re.search(rf"^\[{survivor}\] RAISED ([\d.]+) (.*)$", run.stdout, re.M)
    assert found, run.stdout[-3000:] + run.stderr[-3000:]
    assert float(found.group(1)) < BOUND
    assert f"process {victim} of the 2 in this distributed run" in found.group(2)
    assert "no longer alive" in found.group(2)
    assert run.returncode == (3 if victim == 0 else 5)  # process 0's status comes first
    assert "Terminating process" not in run.stdout + run.stderr  # (XLA's abort)


def test_an_unreachable_coordinator_or_a_missing_process_times_out_cleanly():
    code = f"""
import time, plax
for pid in (1, 0):  # process 1: nobody listens; process 0: process 1 never arrives
    start = time.time()
    try:
        plax.distributed.initialize("127.0.0.1:{free_port()}", 2, pid, initialization_timeout=2)
    except RuntimeError as e:
        print("RAISED", pid, round(time.time() - start), e)
    else:
        print("JOINED", pid)
    break
"""
    run = _python(code)
    assert run.returncode == 0, run.stderr[-3000:]
    # (it gives up near the timeout, not never: a loaded machine may take a few s more)
    assert re.search(r"RAISED 1 [2-6] distributed.initialize: process 1 of 2 could not join the "
                     r"run at 127.0.0.1:\d+ within 2 s \(initialization_timeout\)", run.stdout)
    run = _python(code.replace("(1, 0)", "(0,)"))
    assert run.returncode == 0, run.stderr[-3000:]
    assert re.search(r"RAISED 0 [2-6] .*process 0 of 2 could not join.*all 2 processes were "
                     r"started", run.stdout)


@pytest.mark.parametrize("call,error,match", [
    ("initialize()", ValueError, "coordinator_address should be defined"),
    ("initialize('127.0.0.1:1', 2)", ValueError, "process id of the current process must"),
    ("initialize('127.0.0.1:1', 2, 2)", ValueError, "process_id < num_processes"),
    ("initialize('127.0.0.1:1', 0, 0)", TypeError, "num_processes must be a positive int"),
    ("initialize('localhost', 2, 0)", ValueError, "must be host:port"),
    ("initialize('127.0.0.1:1', 2, 0, cluster_detection_method='k8s')", ValueError,
     "not one plax knows"),
    ("initialize('127.0.0.1:1', 2, 0, initialization_timeout=0)", ValueError,
     "initialization_timeout must be a positive"),
])
def test_bad_arguments_are_refused_before_anything_starts(call, error, match, monkeypatch):
    from plax.runtime import distributed
    for name in ("PLAX_COORDINATOR_ADDRESS", "PLAX_NUM_PROCESSES", "PLAX_PROCESS_ID",
                 "JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID",
                 "SLURM_JOB_ID", "OMPI_MCA_orte_hnp_uri"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(distributed.xla, "backends_started", lambda: False)
    with pytest.raises(error, match=match):
        eval("distributed." + call, {"distributed": distributed})
    assert not distributed.is_initialized()


def test_initialize_after_a_backend_started_and_twice():
    code = """
import plax
plax.devices()
try:
    plax.distributed.initialize("127.0.0.1:1", 1, 0)
except RuntimeError as e:
    print("LATE", e)
"""
    run = _python(code)
    assert "LATE jax.distributed.initialize() must be called before any JAX calls" in run.stdout
    code = f"""
import plax
plax.distributed.initialize("127.0.0.1:{free_port()}", 1, 0)
print("ONE", plax.process_count(), plax.distributed.is_initialized())
from plax.experimental import multihost_utils as mh
with mh.live_devices(plax.devices()[::-1]) as live:
    print("LIVE", [d.id for d in live])
try:
    with mh.live_devices([]):
        pass
except ValueError as e:
    print("EMPTY", e)
try:
    plax.distributed.initialize("127.0.0.1:1", 1, 0)
except RuntimeError as e:
    print("TWICE", e)
plax.distributed.shutdown()
print("AFTER", plax.distributed.is_initialized())
"""
    run = _python(code)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "ONE 1 True" in run.stdout
    assert f"LIVE {list(range(8))}" in run.stdout  # (sorted by id)
    assert "EMPTY No devices provided." in run.stdout
    assert "TWICE distributed.initialize should only be called once." in run.stdout
    assert "AFTER False" in run.stdout


def test_arguments_come_from_the_environment_and_slurm(monkeypatch):
    from plax.runtime import distributed
    for name in ("PLAX_COORDINATOR_ADDRESS", "PLAX_NUM_PROCESSES", "PLAX_PROCESS_ID",
                 "JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID",
                 "OMPI_MCA_orte_hnp_uri"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "4100")
    monkeypatch.setenv("SLURM_STEP_NODELIST", "node[003-007,012],login")
    monkeypatch.setenv("SLURM_NTASKS", "6")
    monkeypatch.setenv("SLURM_PROCID", "2")
    assert distributed._from_environment(None) == ("node003:61444", 6, 2)
    monkeypatch.setenv("PLAX_PROCESS_ID", "4")  # plax's own variables win
    assert distributed._from_environment(None) == ("node003:61444", 6, 4)
    assert distributed._from_environment("deactivate") == (None, None, 4)
    monkeypatch.setenv("SLURM_STEP_NODELIST", "gpu17,gpu18")
    assert distributed._from_environment("slurm")[0] == "gpu17:61444"


def test_a_tpu_pods_workers_give_the_arguments(monkeypatch):
    from plax.runtime import distributed
    for name in ("PLAX_COORDINATOR_ADDRESS", "PLAX_NUM_PROCESSES", "PLAX_PROCESS_ID",
                 "JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID",
                 "OMPI_MCA_orte_hnp_uri", "SLURM_JOB_ID", "TPU_PROCESS_ADDRESSES",
                 "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID",
                 "MEGASCALE_COORDINATOR_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "t-0.svc,t-1.svc,t-2.svc,t-3.svc")
    monkeypatch.setenv("TPU_WORKER_ID", "2")
    assert distributed._from_environment(None) == ("t-0.svc:8482", 4, 2)
    # two slices of four workers: this is worker 2 of slice 1, the run's process 6
    monkeypatch.setenv("MEGASCALE_NUM_SLICES", "2")
    monkeypatch.setenv("MEGASCALE_SLICE_ID", "1")
    monkeypatch.setenv("MEGASCALE_COORDINATOR_ADDRESS", "s0-w0.svc:9000")
    assert distributed._from_environment("gketpu") == ("s0-w0.svc:8482", 8, 6)
    with pytest.raises(ValueError, match="cluster_detection_method='tpu' is not one"):
        distributed._from_environment("tpu")


def test_live_devices_yields_the_live_ones_and_reports_a_death_in_the_block():
    run = _launch("live_devices.py")
    out = run.stdout
    for p in (0, 1):
        assert f"[{p}] BLOCK1 8 28.0" in out, out[-3000:] + run.stderr[-3000:]
        assert re.search(rf"\[{p}\] NOLOCAL Provided devices do not have any local devices",
                         out)
    assert "[1] DYING" in out
    # process 0 ran programs in the block until the death was noticed: their error is the cause
    assert "[0] FAILED 4 True PeerFailureError" in out, out[-3000:] + run.stderr[-3000:]
    assert "[0] BLOCK3 [0, 1, 2, 3]" in out
    assert "[1] BLOCK3" not in out and run.returncode == 3


def test_the_launcher_reports_failures_and_timeouts(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import os, sys\nprint('hello from', os.environ['PLAX_PROCESS_ID'])\n"
                      "sys.exit(int(os.environ['PLAX_PROCESS_ID']) * 7)\n")
    run = subprocess.run([sys.executable, "-m", "plax.distributed.launch", "-n", "3",
                          str(script)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 7
    assert sorted(line for line in run.stdout.splitlines() if "hello" in line) == [
        "[0] hello from 0", "[1] hello from 1", "[2] hello from 2"]
    script.write_text("import time\ntime.sleep(60)\n")
    run = subprocess.run([sys.executable, "-m", "plax.distributed.launch", "-n", "2",
                          "--timeout", "1", str(script)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 124 and "--timeout" in run.stdout
    run = subprocess.run([sys.executable, "-m", "plax.distributed.launch", "-n", "0",
                          str(script)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "-n must be at least 1" in run.stderr
