"""Checkpointing arrays with tensorstore: run_serialization / run_deserialization, and a
manager that writes asynchronously (the copy to the host is awaited, the commit to storage
finishes on a thread) and runs a callback once every process has committed."""
from __future__ import annotations

import abc
import asyncio
import logging
import threading

from plax import tree_util
from plax.experimental.array_serialization import tensorstore_impl as ts_impl
from plax.experimental.array_serialization.tensorstore_impl import (  # noqa: F401
    async_deserialize, async_serialize)
from plax.api.devices import process_count, process_index
from plax.runtime import distributed
from plax.sharding.layouts import Format  # noqa: F401  (a name of this module in JAX)

_log = logging.getLogger(__name__)
_SUCCESS = "checkpoint_write_success"


def __getattr__(name):
    if name == "TS_CONTEXT":
        return ts_impl.TS_CONTEXT
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class BarrierTimeoutError(Exception):
    """Not every process reached the end of a checkpoint's commit in time."""


def is_remote_storage(tspec) -> bool:
    """Whether a path (``gs://``, ``s3://``) or a spec (a gcs or s3 kvstore, at any depth)
    names remote storage."""
    if isinstance(tspec, str):
        return tspec.startswith(("gs://", "s3://"))
    if isinstance(tspec, dict):
        if tspec.get("driver") in ("gcs", "s3"):
            return True
        return any(is_remote_storage(v) for v in tspec.values() if isinstance(v, dict))
    return False


def get_tensorstore_spec(ckpt_path, *, ocdbt: bool = False, process_idx: int | None = None,
                         arr=None, driver: str = "zarr") -> dict:
    """The spec of the array at ``ckpt_path`` as this module writes by default: a zarr
    array in its own directory (``tensorstore_impl.get_tensorstore_spec``'s default is a
    zarr3 array in an OCDBT store)."""
    return ts_impl.get_tensorstore_spec(ckpt_path, ocdbt, process_idx, arr, driver)


def run_serialization(arrays, tensorstore_specs) -> None:
    """Write ``arrays`` to ``tensorstore_specs`` (one spec per array) and wait."""
    ts_impl._run_serialization(arrays, tensorstore_specs)


def run_deserialization(shardings, tensorstore_specs, global_shapes=None, dtypes=None,
                        concurrent_gb: int = 32) -> list:
    """Read the arrays of ``tensorstore_specs``, each laid out by its sharding (or Format)."""
    return ts_impl._run_deserialization(shardings, tensorstore_specs, global_shapes, dtypes,
                                        concurrent_gb)


class GlobalAsyncCheckpointManagerBase(abc.ABC):
    """The interface of an asynchronous checkpoint manager."""

    @abc.abstractmethod
    def check_for_errors(self):
        """Raise the error of a commit that failed in the background, if any."""

    @abc.abstractmethod
    def wait_until_finished(self):
        """Block until the last serialisation has committed everywhere."""

    @abc.abstractmethod
    def serialize(self, arrays, tensorstore_specs, *, on_commit_callback):
        """Start writing ``arrays``; ``on_commit_callback`` runs once all have committed."""

    @abc.abstractmethod
    def deserialize(self, shardings, tensorstore_specs, global_shapes=None, dtypes=None):
        """Read the arrays of ``tensorstore_specs``."""


class AsyncManager:
    """Awaits commit futures on a thread, meets the other processes at a barrier, then runs
    the commit callback (on process 0 only when there are several)."""

    def __init__(self, timeout_secs: int = 300):
        self._timeout_secs = timeout_secs
        self._commit_futures = None
        self._thread = None
        self._exception = None
        self._count = 0
        self._on_commit_callback = None
        run = distributed.current()
        self._client = None if run is None else run.client

    def __del__(self):
        if self._thread is not None and self._thread.is_alive():
            _log.warning("Please call wait_until_finished() in the main thread before exiting "
                         "(a checkpoint is still being committed).")

    def _thread_func(self):
        try:
            for future in self._commit_futures or ():
                future.result()
            if process_count() > 1:
                key = f"plax_checkpoint_{self._count}"
                self._client.wait_at_barrier(key, self._timeout_secs * 1000)
                if process_index() == 0 and self._on_commit_callback is not None:
                    self._on_commit_callback()
                    self._client.key_value_set(key, _SUCCESS)
            elif self._on_commit_callback is not None:
                self._on_commit_callback()
        except Exception as e:  # noqa: BLE001 - raised in the caller's thread later
            self._exception = e

    def _start_async_commit(self, on_commit_callback) -> None:
        self._count += 1
        self._on_commit_callback = on_commit_callback
        self._thread = threading.Thread(target=self._thread_func, daemon=True,
                                        name="plax-checkpoint-commit")
        self._thread.start()

    def check_for_errors(self) -> None:
        if self._exception is not None:
            error, self._exception = self._exception, None
            if "DEADLINE_EXCEEDED" in str(error) or "barrier" in str(error).lower():
                raise BarrierTimeoutError(f"Not every process committed the checkpoint within "
                                          f"{self._timeout_secs} s: {error}") from error
            raise RuntimeError(f"Checkpoint commit failed: {error}") from error

    def wait_until_finished(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.check_for_errors()
        if process_count() > 1 and self._count:
            self._client.blocking_key_value_get(f"plax_checkpoint_{self._count}",
                                                self._timeout_secs * 1000)

    def _add_futures(self, futures) -> None:
        self._commit_futures = list(futures)


class GlobalAsyncCheckpointManager(AsyncManager, GlobalAsyncCheckpointManagerBase):
    """Writes arrays with tensorstore, committing in the background."""

    def serialize(self, arrays, tensorstore_specs, *, on_commit_callback=None,
                  transaction=None) -> None:
        """Copy ``arrays`` to the host and start committing them to ``tensorstore_specs``;
        returns once the copies are done (the arrays may then change)."""
        self.wait_until_finished()
        commit_futures: list = []

        async def copy_all():
            await asyncio.gather(*tree_util.tree_leaves(tree_util.tree_map(
                lambda a, spec: ts_impl.async_serialize(a, spec, commit_future=commit_futures,
                                                        transaction=transaction),
                arrays, tensorstore_specs, is_leaf=ts_impl.is_tensorstore_spec_leaf)))
        asyncio.run(copy_all())
        self._add_futures(commit_futures)
        self._start_async_commit(on_commit_callback)

    def serialize_with_paths(self, arrays, paths, *, on_commit_callback=None,
                             transaction=None) -> None:
        """``serialize`` to the default spec of each path."""
        specs = [ts_impl.get_tensorstore_spec(p, arr=a) for a, p in zip(arrays, paths)]
        self.serialize(arrays, specs, on_commit_callback=on_commit_callback,
                       transaction=transaction)

    def deserialize(self, shardings, tensorstore_specs, global_shapes=None, dtypes=None,
                    concurrent_gb: int = 32) -> list:
        self.wait_until_finished()
        return run_deserialization(shardings, tensorstore_specs, global_shapes, dtypes,
                                   concurrent_gb)

    def deserialize_with_paths(self, shardings, paths, global_shapes=None, dtypes=None,
                               concurrent_gb: int = 32) -> list:
        specs = [ts_impl.get_tensorstore_spec(p) for p in paths]
        return self.deserialize(shardings, specs, global_shapes, dtypes, concurrent_gb)

