"""The coordination service of a distributed run, in a process of its own.

Process 0 of a run starts it (``start``) instead of hosting the service itself. That way a
process 0 that dies does not take the service down with it. XLA's clients abort their
process when the service vanishes; with the service still up, the other processes learn
that process 0 died and raise ``PeerFailureError`` as for any other peer.

The service process lives as long as process 0 does. When process 0 ends normally it
writes ``stop`` to the service's stdin, and the service stops after the other clients have
had ``_STOP_GRACE`` seconds to disconnect. When process 0 dies, the service stays up for
the heartbeat timeout plus ``_AFTER_DEATH`` seconds, so every survivor can find out.

    python -m plax.runtime.coordinator ADDRESS NUM_PROCESSES HEARTBEAT SHUTDOWN PARENT_PID
"""
from __future__ import annotations

import os
import select
import subprocess
import sys
import time

_STOP_GRACE = 1.0
_AFTER_DEATH = 10.0
_READY = "plax-coordinator-ready"


def start(bind_address: str, num_processes: int, heartbeat_timeout: int,
          shutdown_timeout: int, ready_timeout: float = 60.0):
    """Start the service process; returns it once the service listens (or raises)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "plax.runtime.coordinator", bind_address, str(num_processes),
         str(heartbeat_timeout), str(shutdown_timeout), str(os.getpid())],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))  # (its warnings are about itself)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            line = proc.stdout.readline().decode(errors="replace").strip()
            if line == _READY:
                return proc
            if not line and proc.poll() is not None:
                break
    proc.kill()
    raise RuntimeError(f"distributed.initialize: process 0 could not start the coordination "
                       f"service on {bind_address} (is the port free?); its process exited "
                       f"with status {proc.poll()}.")


def stop(proc) -> None:
    """Tell the service process that the run ended normally."""
    try:
        proc.stdin.write(b"stop\n")
        proc.stdin.flush()
    except (BrokenPipeError, OSError):
        pass


def _parent_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return os.getppid() == pid


def _serve(address, num_processes, heartbeat, shutdown_timeout, parent) -> None:
    from plax.runtime import xla
    service = xla.distributed_service(address, num_processes, heartbeat, shutdown_timeout)
    print(_READY, flush=True)
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 0.2)
        if ready:
            line = sys.stdin.readline()
            if line.strip() == "stop" or not line:  # stop, or the parent's pipe closed
                time.sleep(_STOP_GRACE if line else heartbeat + _AFTER_DEATH)
                break
        if not _parent_alive(parent):
            time.sleep(heartbeat + _AFTER_DEATH)
            break
    service.shutdown()


if __name__ == "__main__":
    address, count, heartbeat, shutdown_timeout, parent = sys.argv[1:6]
    _serve(address, int(count), int(heartbeat), int(shutdown_timeout), int(parent))
