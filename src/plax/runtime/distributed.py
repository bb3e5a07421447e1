"""Many processes on XLA's distributed runtime (``plax.distributed`` is the public face).

Process 0 starts XLA's coordination service; every process connects a client to it, and the
CPU client is then created joined to the others (gloo collectives over TCP), so
``devices()`` lists every process's devices and one SPMD program runs across them all.

Failures are reported, never waited on forever:
- a coordinator that cannot be reached makes ``initialize`` raise after
  ``initialization_timeout`` seconds;
- a peer that dies is found by the service's heartbeats (``heartbeat_timeout_seconds``):
  the runtime then calls ``_on_peer_failure`` (instead of aborting the process), which
  records it; the next program run or barrier raises ``PeerFailureError`` naming the
  process, and a program already blocked in a collective fails with the same error as soon
  as gloo loses the peer's connection.
"""
from __future__ import annotations

import atexit
import os
import re
import sys
import threading

from plax.runtime import xla

__all__ = ["initialize", "shutdown", "is_initialized", "PeerFailureError"]

DEFAULT_HEARTBEAT_TIMEOUT = 10  # seconds: a dead peer is reported within about this long


class PeerFailureError(RuntimeError):
    """Another process of the distributed run died or stopped answering the coordination
    service: the collective programs of this run cannot finish."""


class _Runtime:
    def __init__(self, coordinator, process_id, num_processes, service, client, local_ids):
        self.coordinator = coordinator
        self.process_id = process_id
        self.num_processes = num_processes
        self.service = service
        self.client = client
        self.local_device_ids = local_ids
        self.failure: str | None = None  # what the service reported about a failed peer


_state: _Runtime | None = None
_lock = threading.Lock()


def is_initialized() -> bool:
    """Whether ``initialize`` has connected this process to a distributed run."""
    return _state is not None


def current():
    """The connected run (coordinator, process_id, num_processes, client, ...) or None."""
    return _state


# --- where the arguments come from ----------------------------------------------------------
def _slurm():
    env = os.environ
    if not all(k in env for k in ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS",
                                  "SLURM_PROCID")):
        return None
    nodes = env["SLURM_STEP_NODELIST"]
    # The first host of a node list such as "node001", "a,b" or "node[003-007,012],b".
    head, bracket, rest = nodes.partition("[")
    if bracket and "," not in head:
        first = head + re.split(r"[,-]", rest, maxsplit=1)[0]
    else:
        first = nodes.split(",")[0]
    port = int(env["SLURM_JOB_ID"]) % 4096 + 61440  # one port per job, in the top 4096
    return f"{first}:{port}", int(env["SLURM_NTASKS"]), int(env["SLURM_PROCID"])


def _open_mpi():
    env = os.environ
    uri = env.get("OMPI_MCA_orte_hnp_uri")
    if uri is None or "OMPI_COMM_WORLD_SIZE" not in env:
        return None
    found = re.search(r"tcp://([^,:]+)|tcp6://\[([^,\]]+)", uri)
    if found is None:
        raise RuntimeError(f"plax.distributed: cannot read the launcher's address from "
                           f"OMPI_MCA_orte_hnp_uri={uri!r}; pass coordinator_address.")
    host = found.group(1) or f"[{found.group(2)}]"
    port = int(uri.split(".", 1)[0]) // 4096 % 4096 + 61440
    return f"{host}:{port}", int(env["OMPI_COMM_WORLD_SIZE"]), int(env["OMPI_COMM_WORLD_RANK"])


_CLUSTERS = {"slurm": _slurm, "ompi": _open_mpi}


def _from_environment(method):
    """(coordinator, num_processes, process_id) from plax's variables, then a detected
    cluster (SLURM, Open MPI); None for each value nothing gives."""
    env = os.environ
    own = (env.get("PLAX_COORDINATOR_ADDRESS") or env.get("JAX_COORDINATOR_ADDRESS"),
           env.get("PLAX_NUM_PROCESSES") or env.get("JAX_NUM_PROCESSES"),
           env.get("PLAX_PROCESS_ID") or env.get("JAX_PROCESS_ID"))
    own = (own[0], None if own[1] is None else int(own[1]),
           None if own[2] is None else int(own[2]))
    if method == "deactivate":
        return own
    if method is not None and method not in _CLUSTERS:
        raise ValueError(f"cluster_detection_method={method!r} is not one plax knows: use one "
                         f"of {sorted(_CLUSTERS)}, 'deactivate', or None to try them all.")
    for name, detect in _CLUSTERS.items():
        if method in (None, name):
            found = detect()
            if found is not None:
                return tuple(o if o is not None else f for o, f in zip(own, found))
    return own


# --- initialize / shutdown --------------------------------------------------------------------
def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids=None,
               cluster_detection_method: str | None = None, initialization_timeout: int = 300,
               heartbeat_timeout_seconds: int = DEFAULT_HEARTBEAT_TIMEOUT,
               shutdown_timeout_seconds: int = 300, coordinator_bind_address: str | None = None,
               slice_index: int | None = None, partition_index: int | None = None) -> None:
    """Join this process to a distributed run of ``num_processes`` processes (see the
    module docstring). Arguments left out come from ``PLAX_COORDINATOR_ADDRESS``,
    ``PLAX_NUM_PROCESSES`` and ``PLAX_PROCESS_ID`` (or JAX's names), then from a SLURM or
    Open MPI job. Call it once, before anything starts a backend."""
    global _state
    with _lock:
        if _state is not None:
            raise RuntimeError("distributed.initialize should only be called once.")
        if xla.backends_started():
            raise RuntimeError(
                "jax.distributed.initialize() must be called before any JAX calls that might "
                "initialise the XLA backend: this process has already started one (a "
                "computation, plax.devices(), device_put, ...). Call it first thing.")
        env_address, env_count, env_id = _from_environment(cluster_detection_method)
        coordinator_address = coordinator_address or env_address
        num_processes = env_count if num_processes is None else num_processes
        process_id = env_id if process_id is None else process_id
        _check_arguments(coordinator_address, num_processes, process_id)
        for name, value in (("initialization_timeout", initialization_timeout),
                            ("heartbeat_timeout_seconds", heartbeat_timeout_seconds),
                            ("shutdown_timeout_seconds", shutdown_timeout_seconds)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"distributed.initialize: {name} must be a positive number of "
                                 f"seconds, got {value!r}.")
        local_ids = _local_ids(local_device_ids)
        service = None
        if process_id == 0:
            port = coordinator_address.rsplit(":", 1)[1]
            bind = coordinator_bind_address or f"[::]:{port}"
            try:
                service = xla.distributed_service(bind, num_processes,
                                                  heartbeat_timeout_seconds,
                                                  shutdown_timeout_seconds)
            except xla.XlaRuntimeError as e:
                raise RuntimeError(f"distributed.initialize: process 0 could not start the "
                                   f"coordination service on {bind} ({e}); is the port free?"
                                   ) from None
        client = xla.distributed_client(coordinator_address, process_id,
                                        initialization_timeout, heartbeat_timeout_seconds,
                                        shutdown_timeout_seconds, _on_peer_failure)
        try:
            client.connect()
        except xla.XlaRuntimeError as e:
            if service is not None:
                service.shutdown()
            raise RuntimeError(
                f"distributed.initialize: process {process_id} of {num_processes} could not "
                f"join the run at {coordinator_address} within {initialization_timeout} s "
                f"(initialization_timeout). Check that process 0 runs with the same "
                f"coordinator_address and num_processes, and that the address is reachable. "
                f"XLA said: {_first_line(e)}") from None
        host = coordinator_address.rsplit(":", 1)[0]
        loopback = host in ("127.0.0.1", "localhost", "[::1]")
        xla.join_distributed_runtime(client, process_id, num_processes,
                                     "127.0.0.1" if loopback else None)
        _state = _Runtime(coordinator_address, process_id, num_processes, service, client,
                          local_ids)
    atexit.register(_shutdown_at_exit)


def _check_arguments(address, count, pid) -> None:
    if address is None:
        raise ValueError("coordinator_address should be defined: pass it (host:port of "
                         "process 0), or set PLAX_COORDINATOR_ADDRESS.")
    if ":" not in address:
        raise ValueError(f"coordinator_address must be host:port, got {address!r}.")
    if count is None:
        raise ValueError("Number of processes must be defined: pass num_processes or set "
                         "PLAX_NUM_PROCESSES.")
    if pid is None:
        raise ValueError("The process id of the current process must be defined: pass "
                         "process_id or set PLAX_PROCESS_ID.")
    if not isinstance(count, int) or count < 1:
        raise TypeError(f"num_processes must be a positive int, got {count!r}.")
    if not isinstance(pid, int) or not 0 <= pid < count:
        raise ValueError(f"process_id and num_processes must be nonnegative, with process_id "
                         f"< num_processes; got process_id={pid!r}, num_processes={count}.")


def _local_ids(ids):
    """``local_device_ids`` as a tuple (kept for accelerator backends: a CPU process always
    has its ``num_cpu_devices`` devices)."""
    if ids is None:
        return None
    ids = (ids,) if isinstance(ids, int) else tuple(ids)
    if not all(isinstance(i, int) and i >= 0 for i in ids):
        raise TypeError(f"local_device_ids must be non-negative ints, got {ids!r}.")
    return ids


def _first_line(error) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def shutdown() -> None:
    """Leave the distributed run: wait (up to ``shutdown_timeout_seconds``) for the other
    processes to leave too, then disconnect; process 0 stops the service last."""
    global _state
    with _lock:
        state, _state = _state, None
        if state is None:
            return
        xla.join_distributed_runtime(None, 0, 1, None)
        try:
            if state.failure is None:
                state.client.shutdown()
        finally:
            if state.service is not None:
                state.service.shutdown()


def _shutdown_at_exit() -> None:
    try:
        shutdown()
    except Exception as e:  # at exit: report, do not raise into the interpreter's teardown
        print(f"plax.distributed: shutdown at exit failed: {e}", file=sys.stderr)


# --- failures -----------------------------------------------------------------------------------
_TASK = re.compile(r"task[:_ ]?(\d+)")


def _on_peer_failure(status, *rest) -> None:
    """Called by the runtime (on its own thread) when the service reports a failed peer."""
    state = _state
    text = str(status)
    if state is not None and state.failure is None:
        state.failure = text
    print(f"plax.distributed: process {_state.process_id if _state else '?'} was told by the "
          f"coordination service that a peer failed: {text}", file=sys.stderr, flush=True)


def failed_processes() -> list[int]:
    """The processes the coordination service no longer counts as alive (empty when all
    are, or when this process is not in a distributed run)."""
    state = _state
    if state is None:
        return []
    everyone = list(range(state.num_processes))
    try:
        alive = set(state.client.get_live_nodes(everyone))
    except xla.XlaRuntimeError:
        alive = {state.process_id}  # the service itself is gone with process 0
        if state.process_id != 0:
            return [0]
    return [p for p in everyone if p not in alive]


def peer_failure_error(cause=None) -> PeerFailureError | None:
    """The error to raise for a failed peer, or None when every process is alive (and the
    service reported nothing)."""
    state = _state
    if state is None:
        return None
    dead = failed_processes()
    if not dead and state.failure is None:
        return None
    who = (", ".join(f"process {p}" for p in dead) if dead else "a peer process")
    said = f" The coordination service said: {state.failure}" if state.failure else ""
    because = f" XLA said: {_first_line(cause)}" if cause is not None else ""
    return PeerFailureError(
        f"{who} of the {state.num_processes} in this distributed run (coordinator "
        f"{state.coordinator}) died or stopped answering, so process {state.process_id} "
        f"cannot run collective programs any more.{said}{because} Restart the run.")
