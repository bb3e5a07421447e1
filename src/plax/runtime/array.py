"""plax.Array: an immutable array living on one or more devices."""
from __future__ import annotations

import gc

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray, physical_aval
from plax.core.trace import Tracer
from plax.runtime import xla
from plax.sharding.single import SingleDeviceSharding



def all_arrays() -> list:
    """Every Array object alive in this process (a scan: for rare calls like live_arrays)."""
    return [o for o in gc.get_objects() if type(o) is Array]


class Shard:
    """One device's piece of an Array."""

    __slots__ = ("device", "index", "data", "replica_id")

    def __init__(self, device, index, data, replica_id=0):
        self.device, self.index, self.data, self.replica_id = device, index, data, replica_id

    def __repr__(self):
        return f"Shard(device={self.device!r}, index={self.index}, replica_id={self.replica_id})"


class _ArrayMeta(type):
    """Makes ``isinstance(tracer, Array)`` True, as in JAX (traced code sees arrays).

    Subclass checks are unchanged: ``issubclass(Tracer, Array)`` is False, as in JAX.
    Code that means "a concrete array on devices" tests ``type(x) is Array``.
    """

    # A C-level callable that the type lookup does not bind: with CPython's exact-type
    # shortcut, isinstance(x, Array) is ``type(x) is Array or isinstance(x, Tracer)`` at
    # the cost of a plain isinstance (a Python method here would cost ~150ns per check).
    __instancecheck__ = Tracer.__instancecheck__


def array_from_parts(aux, children):
    """The Array C++ dispatch rebuilds from ``Array._parts`` (one frame, no __init__ call)."""
    a = _new_object(Array)
    a._buf = children[0]
    a.aval, a._committed = aux
    a._npy = None
    a._parts = (children, aux)
    return a


_new_object = object.__new__
_shared_aux: dict = {}


def _instancecheck_with_subclasses(cls, x):
    return type.__instancecheck__(cls, x) or (cls is Array and isinstance(x, Tracer))


class Array(metaclass=_ArrayMeta):
    """An array on devices. Immutable: operations return new arrays.

    Operators and NumPy-style methods are attached by ``plax.numpy``.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _ArrayMeta.__instancecheck__ = _instancecheck_with_subclasses  # no exact-type shortcut now

    # ``_parts`` is (children, aux) as jit's C++ dispatch flattens an Array (a pytree node
    # over its buffer; see runtime/cpp_jit.py): kept ready, it is read with no Python frame.
    __slots__ = ("aval", "_buf", "_committed", "_npy", "_parts", "__weakref__")
    __array_priority__ = 100

    def __init__(self, buf, aval: ShapedArray, committed: bool = False):
        self._buf = buf
        self.aval = aval
        self._committed = committed
        self._npy = None
        aux = (aval, committed)
        # One tuple per distinct (type, commitment): C++ then compares signatures by identity.
        shared = _shared_aux.get(aux)
        if shared is None:
            if len(_shared_aux) > 65536:
                _shared_aux.clear()
            shared = _shared_aux[aux] = aux
        self._parts = ((buf,), shared)

    # --- metadata ---
    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def sharding(self):
        return self._buf._sharding

    @property
    def committed(self) -> bool:
        return self._committed

    @property
    def is_fully_addressable(self) -> bool:
        """Whether this process holds every shard (always, for a single-device array)."""
        return self.sharding.is_fully_addressable

    @property
    def is_fully_replicated(self) -> bool:
        """Whether every shard holds the whole array (always, for a single-device array)."""
        return self.sharding.is_fully_replicated

    def devices(self) -> set:
        return set(self.sharding.device_set)

    @property
    def device(self):
        devs = self.sharding._device_assignment
        if len(devs) != 1:
            raise ValueError("device is only defined for an array on a single device; "
                             f"this one spans {len(devs)}. Use .devices() or .sharding.")
        return devs[0]

    @property
    def addressable_shards(self) -> list:
        self._check_alive()
        bufs = xla.shards(self._buf)
        index_map = self.sharding.devices_indices_map(self.shape)
        replicas = self.sharding.replica_ids(self.shape)
        aval = ShapedArray(self.sharding.shard_shape(self.shape), self.dtype, self.weak_type)
        out = []
        for b in bufs:
            dev = xla.shard_device(b)
            # jaxlib hands out shards with its own SingleDeviceSharding: give them plax's.
            b = xla.assemble(physical_aval(aval), SingleDeviceSharding(dev), [b],
                             self._committed)
            out.append(Shard(dev, index_map[dev], Array(b, aval, self._committed), replicas[dev]))
        return out

    @property
    def global_shards(self) -> list:
        """Every shard (all addressable in a single process)."""
        return self.addressable_shards

    def addressable_data(self, index: int) -> "Array":
        """The data of addressable shard ``index``."""
        return self.addressable_shards[index].data

    # --- host interop ---
    def _value(self) -> np.ndarray:
        """The data as a read-only host array, fetched once and cached."""
        if dtypes.is_extended(self.aval.dtype):
            raise TypeError("JAX array with PRNGKey dtype cannot be converted to a NumPy "
                            "array. Use jax.random.key_data(arr) if you wish to extract the "
                            "underlying integer array.")
        return self._physical_value()

    def _physical_value(self) -> np.ndarray:
        """The data as stored (a PRNG key array: its uint32 words), read-only and cached."""
        if self._npy is None:
            self._check_alive()
            bufs = xla.shards(self._buf)
            if len(bufs) == 1:
                val = xla.to_numpy(bufs[0])
            else:
                val = self._assemble_on_host(bufs)
            shape = physical_aval(self.aval).shape
            val = val.reshape(shape) if val.shape != shape else val
            val.flags.writeable = False
            self._npy = val
        return self._npy

    def _assemble_on_host(self, bufs) -> np.ndarray:
        phys = physical_aval(self.aval)
        out = np.empty(phys.shape, phys.dtype)
        index_map = self.sharding.devices_indices_map(self.shape)
        replicas = getattr(self.sharding, "replica_ids", None)
        if replicas is not None:  # one copy of each block: replica 0's (as JAX reads it)
            first = replicas(self.shape)
            bufs = [b for b in bufs if first[xla.shard_device(b)] == 0]
        for b in bufs:
            xla.copy_to_host_async(b)
        for b in bufs:
            out[index_map[xla.shard_device(b)]] = xla.to_numpy(b)
        return out

    def __array__(self, dtype=None, copy=None):
        val = self._value()
        if copy is False and dtype is not None and np.dtype(dtype) != val.dtype:
            raise ValueError("Unable to avoid a copy while converting the dtype of a plax Array.")
        if dtype is not None and np.dtype(dtype) != val.dtype:
            return val.astype(dtype)
        return val.copy() if copy else val

    def item(self, *args):
        return self._value().item(*args)

    def tolist(self):
        return self._value().tolist()

    def __bool__(self):
        return bool(self._value())

    def __int__(self):
        return int(self._value())

    def __float__(self):
        return float(self._value())

    def __complex__(self):
        return complex(self._value())

    def __index__(self):
        if not dtypes.is_integer(self.dtype):
            raise TypeError(f"Only integer scalar arrays can be converted to a scalar index, "
                            f"not an array of {self.dtype}.")
        return int(self._value())

    def __hash__(self):
        raise TypeError("unhashable type: 'Array'. plax arrays are mutable-looking values; "
                        "use a tuple or a NumPy array's bytes as a dictionary key.")

    def __reduce__(self):
        if dtypes.is_extended(self.dtype):
            return (_rebuild_keys, (np.asarray(self._physical_value()), self.dtype._impl.name))
        return (_rebuild, (np.asarray(self._value()), self.weak_type))

    def __repr__(self):
        if self.is_deleted():
            return "Array(<deleted>)"
        if dtypes.is_extended(self.dtype):
            return f"Array({self.shape}, dtype={self.dtype.name}) overlaying:\n" \
                   f"{self._physical_value()}"
        val = self._value()
        body = np.array2string(val, separator=", ", prefix="Array(")
        weak = ", weak_type=True" if self.weak_type else ""
        shape = f", shape={self.shape}" if self.size == 0 else ""  # [] alone hides the shape
        return f"Array({body}{shape}, dtype={self.dtype.name}{weak})"

    def __str__(self):
        if dtypes.is_extended(self.dtype):
            return repr(self)
        return str(self._value())

    def __format__(self, spec):
        if dtypes.is_extended(self.dtype):
            return format(str(self), spec)
        if self.ndim == 0:
            return format(self._value()[()], spec)
        return format(str(self), spec)

    # --- lifetime ---
    def block_until_ready(self) -> "Array":
        self._check_alive()
        self._buf.block_until_ready()
        return self

    def is_ready(self) -> bool:
        return self._buf.is_ready()

    def delete(self) -> None:
        self._buf.delete()
        self._npy = None

    def is_deleted(self) -> bool:
        return self._buf.is_deleted()

    def _check_alive(self):
        if self._buf.is_deleted():
            raise RuntimeError("Array has been deleted (it was donated to a computation or "
                               "deleted with .delete()); it cannot be used again.")

    def copy_to_host_async(self) -> None:
        self._check_alive()
        xla.copy_to_host_async(self._buf)

    def __plax_array__(self):
        return self


def _rebuild(value, weak_type):
    from plax.runtime.dispatch import array_from_host
    return array_from_host(value, weak_type=weak_type)


def _rebuild_keys(data, impl_name):
    from plax.random import wrap_key_data  # (plax.random is above the runtime)
    return wrap_key_data(data, impl=impl_name)
