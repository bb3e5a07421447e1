"""Run a script as N processes of one distributed run on this machine.

    python -m plax.distributed.launch -n 2 [--devices-per-process 4] script.py args...

Each process runs ``script.py`` with ``jax`` resolving to plax (as ``python -m plax`` does)
and with ``PLAX_COORDINATOR_ADDRESS`` (127.0.0.1 and a free port), ``PLAX_NUM_PROCESSES`` and
``PLAX_PROCESS_ID`` set, so ``plax.distributed.initialize()`` needs no arguments. Their output
is forwarded line by line with a ``[process]`` prefix. The launcher exits with the first
non-zero status of any process (0 when all succeed); with ``--timeout`` it stops every process
still running after that many seconds and exits with 124.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _forward(stream, prefix: str, out) -> None:
    for line in iter(stream.readline, b""):
        out.write(prefix + line.decode(errors="replace"))
        out.flush()
    stream.close()


def launch(script_and_args: list[str], num_processes: int, devices_per_process=None,
           port: int | None = None, timeout: float | None = None, out=None) -> int:
    """Start the processes, forward their output, and return the run's exit status."""
    out = out or sys.stdout
    port = port or free_port()
    procs, threads = [], []
    for pid in range(num_processes):
        env = dict(os.environ, PLAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
                   PLAX_NUM_PROCESSES=str(num_processes), PLAX_PROCESS_ID=str(pid),
                   PYTHONUNBUFFERED="1")
        if devices_per_process is not None:
            env["PLAX_NUM_CPU_DEVICES"] = str(devices_per_process)
        proc = subprocess.Popen([sys.executable, "-m", "plax", *script_and_args], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        procs.append(proc)
        thread = threading.Thread(target=_forward, args=(proc.stdout, f"[{pid}] ", out),
                                  daemon=True)
        thread.start()
        threads.append(thread)
    deadline = None if timeout is None else time.monotonic() + timeout
    status = 0
    try:
        while any(p.poll() is None for p in procs):
            if deadline is not None and time.monotonic() > deadline:
                out.write(f"plax.distributed.launch: stopping the processes still running "
                          f"after {timeout} s (--timeout).\n")
                status = 124
                break
            time.sleep(0.05)
    finally:
        for p in procs:  # a timeout, Ctrl-C, or the launcher's own failure: stop them all
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for t in threads:
            t.join(timeout=5)
    if status == 0:
        status = next((p.returncode for p in procs if p.returncode != 0), 0)
    return status if status >= 0 else 128 - status  # killed by a signal: 128 + its number


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m plax.distributed.launch",
        description="Run a script as N processes of one distributed run on this machine.")
    parser.add_argument("-n", "--num-processes", type=int, required=True)
    parser.add_argument("--devices-per-process", type=int, default=None,
                        help="CPU devices of each process (PLAX_NUM_CPU_DEVICES)")
    parser.add_argument("--port", type=int, default=None, help="the coordinator's port "
                        "(default: a free one)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="stop every process after this many seconds")
    parser.add_argument("script", help="the Python script each process runs")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    ns = parser.parse_args(argv)
    if ns.num_processes < 1:
        parser.error(f"-n must be at least 1, got {ns.num_processes}")
    if ns.devices_per_process is not None and ns.devices_per_process < 1:
        parser.error(f"--devices-per-process must be at least 1, got {ns.devices_per_process}")
    return launch([ns.script, *ns.args], ns.num_processes, ns.devices_per_process, ns.port,
                  ns.timeout)


if __name__ == "__main__":
    sys.exit(main())
