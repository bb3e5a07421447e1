"""Many processes on XLA's distributed runtime (``plax.distributed`` is the public face).

Process 0 starts XLA's coordination service (in a process of its own: runtime/coordinator.py);
every process connects a client to it, and the CPU client is then created joined to the
others (gloo collectives over TCP), so ``devices()`` lists every process's devices and one
SPMD program runs across them all.

Failures are reported, never waited on forever:
- a coordinator that cannot be reached makes ``initialize`` raise after
  ``initialization_timeout`` seconds;
- a peer that dies is noticed by a watchdog thread in each process. It asks the service
  which processes are alive (``get_live_nodes``: every live process's watchdog takes part,
  and the service counts a process dead once it has missed ``heartbeat_timeout_seconds`` of
  heartbeats). The service's tasks are recoverable, so XLA itself does not abort the
  survivors.
- the main thread learns of it wherever it would otherwise wait for ever, and raises
  ``PeerFailureError`` naming the dead processes: programs run on a runner thread while
  the caller waits in Python (the C++ jit fast path is off for a distributed run), waits
  on results poll the arrays, and ``barrier`` polls too. XLA's threads may stay stuck on the
  dead peer; they are abandoned when the process ends.
- ``shutdown`` (also at exit) first meets every process at a barrier, so one that finishes
  early does not look dead to the others.
"""
from __future__ import annotations

import atexit
import concurrent.futures
import os
import queue
import re
import sys
import threading
import time

from plax.runtime import coordinator, xla

__all__ = ["initialize", "shutdown", "is_initialized", "PeerFailureError"]

DEFAULT_HEARTBEAT_TIMEOUT = 10  # seconds: a dead peer is reported within about this long
_WATCH_INTERVAL = 0.5  # seconds between two liveness rounds


class PeerFailureError(RuntimeError):
    """Another process of the distributed run died or stopped answering the coordination
    service: the collective programs of this run cannot finish."""


PeerFailureError.__module__ = "plax.distributed"


class _Runtime:
    def __init__(self, coordinator, process_id, num_processes, service, client, local_ids,
                 shutdown_timeout):
        self.coordinator = coordinator
        self.process_id = process_id
        self.num_processes = num_processes
        self.service = service
        self.client = client
        self.local_device_ids = local_ids
        self.shutdown_timeout = shutdown_timeout
        self.dead: list[int] = []  # the processes the watchdog found dead
        self.closing = threading.Event()  # set once every process reached shutdown
        self.barriers: dict[str, int] = {}  # barrier name -> how many times it was used


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


def _tpu_pod():
    """A TPU pod slice (or several, with Megascale) whose workers the environment lists, as
    GKE sets it (TPU_WORKER_HOSTNAMES or TPU_PROCESS_ADDRESSES, TPU_WORKER_ID): process 0 of
    the first slice coordinates, on JAX's port 8482. (Cloud TPU VMs that give these only
    through the metadata server need coordinator_address and the rest passed.)"""
    env = os.environ
    workers = env.get("TPU_PROCESS_ADDRESSES") or env.get("TPU_WORKER_HOSTNAMES")
    if workers is None or "TPU_WORKER_ID" not in env:
        return None
    workers = workers.split(",")
    slices = int(env.get("MEGASCALE_NUM_SLICES") or 1)
    slice_id = int(env.get("MEGASCALE_SLICE_ID") or 0)
    head = (env.get("MEGASCALE_COORDINATOR_ADDRESS") or workers[0]).split(":")[0]
    return (f"{head}:8482", len(workers) * slices,
            int(env["TPU_WORKER_ID"]) + slice_id * len(workers))


_CLUSTERS = {"slurm": _slurm, "ompi": _open_mpi, "gketpu": _tpu_pod}


def _from_environment(method):
    """(coordinator, num_processes, process_id) from plax's variables, then a detected
    cluster (SLURM, Open MPI, a TPU pod); None for each value nothing gives."""
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
    Open MPI job or a TPU pod's worker list. Call it once, before anything starts a backend."""
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
        if process_id == 0:  # the service runs in a process of its own (runtime/coordinator.py)
            port = coordinator_address.rsplit(":", 1)[1]
            service = coordinator.start(coordinator_bind_address or f"[::]:{port}",
                                        num_processes, heartbeat_timeout_seconds,
                                        shutdown_timeout_seconds)
        # XLA's own connect timeout aborts the process; so it gets none, and the wait for
        # every process to arrive is ours (a Python error).
        client = xla.distributed_client(coordinator_address, process_id, _NEVER,
                                        heartbeat_timeout_seconds, shutdown_timeout_seconds)
        try:
            _connect(client, coordinator_address, process_id, num_processes,
                     initialization_timeout)
        except RuntimeError:
            if service is not None:
                service.kill()
            raise
        host = coordinator_address.rsplit(":", 1)[0]
        loopback = host in ("127.0.0.1", "localhost", "[::1]")
        xla.join_distributed_runtime(client, process_id, num_processes,
                                     "127.0.0.1" if loopback else None, wait_watching,
                                     run_watching, local_ids)
        _state = _Runtime(coordinator_address, process_id, num_processes, service, client,
                          local_ids, shutdown_timeout_seconds)
        if num_processes > 1:
            threading.Thread(target=_watch, args=(_state,), name="plax-distributed-watchdog",
                             daemon=True).start()
    atexit.register(_shutdown_at_exit)


_NEVER = 10 ** 7  # seconds: a timeout XLA never reaches


def _connect(client, address, process_id, num_processes, timeout) -> None:
    """Connect ``client`` (which waits for every process to arrive) within ``timeout``
    seconds, or raise a RuntimeError saying who is missing."""
    future = _in_background(client.connect, name="plax-distributed-connect")
    try:
        future.result(timeout)
        return
    except TimeoutError:  # (the stuck connect is abandoned)
        said = ""
    except Exception as e:
        said = f" XLA said: {_first_line(e)}"
    raise RuntimeError(
            f"distributed.initialize: process {process_id} of {num_processes} could not join "
            f"the run at {address} within {timeout} s (initialization_timeout): the "
            f"coordinator did not answer, or not every process arrived. Check that process 0 "
            f"runs with this coordinator_address, that the address is reachable from here, "
            f"and that all {num_processes} processes were started.{said}")


def _in_background(fn, *args, name: str) -> concurrent.futures.Future:
    """``fn(*args)`` on a daemon thread of its own, as a Future: a call stuck on a dead peer
    is abandoned when the process ends instead of holding up its exit."""
    future = concurrent.futures.Future()

    def run():
        try:
            future.set_result(fn(*args))
        except BaseException as e:  # noqa: BLE001 (handed to whoever waits)
            future.set_exception(e)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


def _await(future: concurrent.futures.Future, processes=None):
    """``future``'s result, raising PeerFailureError instead if one of ``processes`` (any
    process, when None) dies while it is awaited."""
    while True:
        try:
            return future.result(timeout=0.05)
        except TimeoutError:
            check_peers(processes)


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
    """``local_device_ids`` as a tuple: the GPUs this process drives (a CPU process always
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
    """Leave the distributed run: meet the other processes at a barrier (up to
    ``shutdown_timeout_seconds``), then disconnect; process 0 stops the service last."""
    global _state
    with _lock:
        state = _state
        if state is None:
            return
        try:
            if not state.dead and state.num_processes > 1:
                barrier("plax_shutdown", timeout=state.shutdown_timeout)
        finally:
            state.closing.set()
            _state = None
            xla.join_distributed_runtime(None, 0, 1, None)
            if not state.dead:
                state.client.shutdown()
            if state.service is not None:
                coordinator.stop(state.service)


def _shutdown_at_exit() -> None:
    state = _state
    if state is None or state.dead:  # (after a failure: leave without waiting for anyone)
        return
    try:
        shutdown()
    except Exception as e:  # at exit: report, do not raise into the interpreter's teardown
        print(f"plax.distributed: shutdown at exit failed: {e}", file=sys.stderr, flush=True)


# --- failures -----------------------------------------------------------------------------------
def _watch(state: _Runtime) -> None:
    """The watchdog: rounds of get_live_nodes (all live processes' watchdogs take part)
    until the run closes. A process missing from a round is recorded as dead (the main
    thread raises on its next wait) and reported on stderr; the survivors go on being
    watched, for ``multihost_utils.live_devices``."""
    everyone = list(range(state.num_processes))
    while not state.closing.is_set():
        try:
            alive = set(state.client.get_live_nodes(everyone))
        except Exception:  # the service is gone: process 0 died (or the run is closing)
            alive = set(everyone) - {0} if state.process_id != 0 else {0}
        if state.closing.is_set():
            return
        newly_dead = [p for p in everyone if p not in alive and p not in state.dead]
        if newly_dead:
            state.dead = sorted(state.dead + newly_dead)
            print(f"plax.distributed: {_describe(state)}", file=sys.stderr, flush=True)
        state.closing.wait(_WATCH_INTERVAL)


def _describe(state: _Runtime) -> str:
    who = ", ".join(f"process {p}" for p in state.dead)
    verb = "is" if len(state.dead) == 1 else "are"
    return (f"{who} of the {state.num_processes} in this distributed run (coordinator "
            f"{state.coordinator}) {verb} no longer alive (it died, or missed the "
            f"coordination service's heartbeats), so process {state.process_id} cannot finish "
            f"programs that need it. Restart the run.")


def check_peers(processes=None) -> None:
    """Raise PeerFailureError if the watchdog found a dead process (among ``processes``,
    when given)."""
    state = _state
    if state is not None and any(processes is None or p in processes for p in state.dead):
        raise PeerFailureError(_describe(state))


def failed_processes() -> list[int]:
    """The processes found dead so far (empty when all are alive, or outside a run)."""
    state = _state
    return list(state.dead) if state is not None else []


def meet_live(processes, timeout: float = 300.0) -> set[int]:
    """Wait at a barrier for those of ``processes`` still alive, and return them. A process
    that dies while the others wait is left out (the others meet again without it), so the
    processes that return agree on the set; TimeoutError after ``timeout`` seconds."""
    state = _state
    while True:
        alive = [p for p in sorted(set(processes)) if p not in state.dead]
        if len(alive) <= 1:
            return set(alive)
        try:
            barrier("plax_live:" + ",".join(map(str, alive)), timeout, processes=alive)
            return set(alive)
        except PeerFailureError:
            continue  # one of them died meanwhile: meet again, without it


def wait_watching(values) -> None:
    """Wait until ``values`` (jaxlib arrays or tokens) are ready, raising PeerFailureError
    instead of waiting for ever when a peer dies."""
    check_peers()
    pending = [v for v in values if hasattr(v, "is_ready")]
    pause = 0.0001
    while pending:
        pending = [v for v in pending if not v.is_ready()]
        if not pending:
            return
        check_peers()
        time.sleep(pause)
        pause = min(pause * 2, 0.01)


_runs: queue.SimpleQueue | None = None  # programs for the runner thread, made on first use


def _runner(runs: queue.SimpleQueue) -> None:
    while True:
        future, run, args = runs.get()
        try:
            future.set_result(run(*args))
        except BaseException as e:  # noqa: BLE001 (handed to the caller)
            future.set_exception(e)


def run_watching(run, *args):
    """``run(*args)`` (a program's execution) on the runner thread, one at a time in order,
    waited for here so that PeerFailureError can be raised while it is stuck on a dead peer.
    The runner is a daemon thread: stuck, it does not hold up the process's exit."""
    global _runs
    check_peers()
    if _runs is None:
        _runs = queue.SimpleQueue()
        threading.Thread(target=_runner, args=(_runs,), name="plax-run", daemon=True).start()
    future = concurrent.futures.Future()
    _runs.put((future, run, args))
    return _await(future)


def barrier(name: str, timeout: float = 300.0, processes=None) -> None:
    """Wait until every process (or every one of ``processes``) reaches the barrier ``name``
    (a name may be used again: each use is its own barrier), raising PeerFailureError if one
    of them dies first and TimeoutError after ``timeout`` seconds."""
    state = _state
    if state is None or state.num_processes == 1:
        return
    count = state.barriers.get(name, 0)
    state.barriers[name] = count + 1
    key = f"{name}#{count}"
    ids = None if processes is None else sorted(processes)
    future = _in_background(state.client.wait_at_barrier, key, int(timeout * 1000), ids,
                            name=f"plax-barrier-{name}")
    try:
        _await(future, ids)  # (a death after everyone arrived is for the next wait to report)
    except PeerFailureError:
        raise
    except Exception as e:  # the barrier failed or timed out
        check_peers(ids)
        raise TimeoutError(f"plax.distributed: process {state.process_id} waited {timeout} s "
                           f"at barrier {name!r} and not every process arrived "
                           f"({_first_line(e)}).") from None
