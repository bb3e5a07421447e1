"""plax's arrays: jaxlib's C++ array type with plax's methods, and arrays of PRNG keys.

A concrete array is jaxlib's C++ ``ArrayImpl``, as in JAX: jit's C++ dispatch
(runtime/cpp_jit.py) takes one as an argument and makes one as a result with no
Python in between. plax attaches its methods to that class: metadata, host
conversion, reprs and lifetime here, operators and NumPy-style methods in
``plax.numpy``. An array of PRNG keys is a ``KeyArray``: a typed view over the
uint32 ``ArrayImpl`` holding the keys' words. ``Array`` is the type users check
against (``plax.Array``): concrete arrays of both kinds, and tracers, are its
instances.

Inside plax, ``type(x) in CONCRETE`` asks "a concrete array on devices", and
``buffer_of(x)`` is the jaxlib array an executable takes for it.
"""
from __future__ import annotations

import enum
import gc
import warnings

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray, physical_aval
from plax.core.trace import Tracer
from plax.runtime import xla
from plax.sharding.single import SingleDeviceSharding

ArrayImpl = xla.ArrayImpl
# jaxlib's own lifetime methods, kept before plax's versions (which check first) replace them.
_cpp_block_until_ready = ArrayImpl.block_until_ready
_cpp_is_ready = ArrayImpl.is_ready


class DLDeviceType(enum.IntEnum):
    """DLPack's device kinds (of those plax runs on)."""
    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3  # pinned host memory (a producer's; plax reads it as CUDA's)
    kDLROCM = 10


NOT_ADDRESSABLE = (
    "Fetching value for `jax.Array` that spans non-addressable (non process local) devices is "
    "not possible. This process does not hold all of the array's shards: gather the whole value "
    "onto every process with plax.experimental.multihost_utils.process_allgather, or read this "
    "process's part through the array's .addressable_shards.")


class Shard:
    """One device's piece of an Array (``data`` is None for another process's device)."""

    __slots__ = ("device", "index", "data", "replica_id")

    def __init__(self, device, index, data, replica_id=0):
        self.device, self.index, self.data, self.replica_id = device, index, data, replica_id

    def __repr__(self):
        return f"Shard(device={self.device!r}, index={self.index}, replica_id={self.replica_id})"


class _ArrayMethods:
    """What every concrete array can do; copied onto ``ArrayImpl``, inherited by ``KeyArray``.

    Written against the attributes both share: ``aval``, ``_sharding``, ``_committed``,
    ``_npy_value`` (the host copy, once read) and ``is_deleted()``.
    """

    __slots__ = ()
    __array_priority__ = 100

    # --- metadata ---
    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)

    @property
    def __numpy_dtype__(self):
        """What ``np.dtype(array)`` gives (NumPy 2.4's protocol): deprecated, as in JAX."""
        warnings.warn("Implicit conversion of an array to a dtype is deprecated; rather than "
                      "dtype=arr use dtype=arr.dtype. In the future this will result in an "
                      "error.", DeprecationWarning, stacklevel=2)
        return self.aval.dtype
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
        return self._sharding

    @property
    def committed(self) -> bool:
        return self._committed

    @property
    def is_fully_addressable(self) -> bool:
        """Whether this process holds every shard (always, for a single-device array)."""
        return self._sharding.is_fully_addressable

    @property
    def is_fully_replicated(self) -> bool:
        """Whether every shard holds the whole array (always, for a single-device array)."""
        return self._sharding.is_fully_replicated

    def devices(self) -> set:
        return set(self._sharding.device_set)

    @property
    def device(self):
        """The array's device; for an array on several devices its sharding (Array API)."""
        devs = self._sharding._device_assignment
        return devs[0] if len(devs) == 1 else self._sharding

    @property
    def addressable_shards(self) -> list:
        self._check_alive()
        bufs = xla.shards(buffer_of(self))
        index_map = self._sharding.devices_indices_map(self.shape)
        replicas = self._sharding.replica_ids(self.shape)
        aval = ShapedArray(self._sharding.shard_shape(self.shape), self.dtype, self.weak_type)
        out = []
        for b in bufs:
            dev = xla.shard_device(b)
            # jaxlib hands out shards with its own SingleDeviceSharding: give them plax's.
            b = xla.assemble(physical_aval(aval), SingleDeviceSharding(
                dev, memory_kind=self._sharding.memory_kind), [b], self._committed)
            out.append(Shard(dev, index_map[dev], make_array(b, aval, self._committed),
                             replicas[dev]))
        return out

    @property
    def global_shards(self) -> list:
        """A shard per device of the sharding, in its device order; a shard on another
        process's device has ``data`` None."""
        if self.is_fully_addressable:
            return self.addressable_shards
        mine = {s.device: s for s in self.addressable_shards}
        index_map = self._sharding.devices_indices_map(self.shape)
        replicas = self._sharding.replica_ids(self.shape)
        return [mine.get(d) or Shard(d, index_map[d], None, replicas[d])
                for d in self._sharding._device_assignment]

    def _readable(self) -> bool:
        """Whether this process can read the whole value: it holds every shard, or one of
        many full copies."""
        s = self._sharding
        return s.is_fully_addressable or (s.is_fully_replicated and bool(s.addressable_devices))

    def addressable_data(self, index: int):
        """The data of addressable shard ``index``."""
        return self.addressable_shards[index].data

    # --- host interop ---
    @property
    def _value(self) -> np.ndarray:
        """The data as a read-only host array, fetched once and cached."""
        if dtypes.is_extended(self.aval.dtype):
            raise TypeError("JAX array with PRNGKey dtype cannot be converted to a NumPy "
                            "array. Use jax.random.key_data(arr) if you wish to extract the "
                            "underlying integer array.")
        return self._physical_value()

    def _physical_value(self) -> np.ndarray:
        """The data as stored (a PRNG key array: its uint32 words), read-only.

        A host copy is cached on the array; a view of the device buffer itself (the CPU's
        zero-copy read) is not, as in JAX: holding it would pin the buffer (it could no
        longer be donated), and reading it again costs nothing.
        """
        val = self._npy_value
        if val is None or self.is_deleted():  # (jaxlib keeps the host copy past a delete)
            self._check_alive()
            buf = buffer_of(self)
            if type(self._sharding) is SingleDeviceSharding and \
                    self._sharding.device_for_dispatch.process_index == xla.process_index():
                val, copied = xla.to_numpy_did_copy(buf)
            elif not self._sharding.is_fully_addressable:
                if not self._readable():
                    raise RuntimeError(NOT_ADDRESSABLE)
                val, copied = xla.to_numpy_did_copy(xla.shards(buf)[0])  # a full copy here
            else:
                bufs = xla.shards(buf)
                if len(bufs) == 1:
                    val, copied = xla.to_numpy_did_copy(bufs[0])
                else:
                    val, copied = self._assemble_on_host(bufs), True
            shape = physical_aval(self.aval).shape
            val = val.reshape(shape) if val.shape != shape else val
            val.flags.writeable = False
            if copied:
                self._npy_value = val
        return val

    def _assemble_on_host(self, bufs) -> np.ndarray:
        phys = physical_aval(self.aval)
        out = np.empty(phys.shape, phys.dtype)
        index_map = self._sharding.devices_indices_map(self.shape)
        replicas = getattr(self._sharding, "replica_ids", None)
        if replicas is not None:  # one copy of each block: replica 0's (as JAX reads it)
            first = replicas(self.shape)
            bufs = [b for b in bufs if first[xla.shard_device(b)] == 0]
        for b in bufs:
            xla.copy_to_host_async(b)
        for b in bufs:
            out[index_map[xla.shard_device(b)]] = xla.to_numpy(b)
        return out

    def __array__(self, dtype=None, copy=None):
        val = self._value
        if copy is False and dtype is not None and np.dtype(dtype) != val.dtype:
            raise ValueError("Unable to avoid a copy while converting the dtype of a plax Array.")
        if dtype is not None and np.dtype(dtype) != val.dtype:
            return val.astype(dtype)
        return val.copy() if copy else val

    def item(self, *args):
        return self._value.item(*args)

    def tobytes(self, order="C") -> bytes:
        """The data's bytes, as NumPy's ``tobytes`` gives them."""
        return self._value.tobytes(order)

    @property
    def flat(self):
        raise NotImplementedError("JAX Arrays do not implement the arr.flat property (plax "
                                  "arrays are immutable device arrays): use arr.flatten() or "
                                  "arr.ravel() instead.")

    def tolist(self):
        return self._value.tolist()

    def __bool__(self):
        return bool(self._value)

    def _scalar(self):
        if self.ndim:
            raise TypeError("Only scalar arrays can be converted to Python scalars; got "
                            f"arr.ndim={self.ndim}")
        return self._value

    def __int__(self):
        return int(self._scalar())

    def __float__(self):
        return float(self._scalar())

    def __complex__(self):
        return complex(self._scalar())

    def __index__(self):
        if not dtypes.is_integer(self.dtype):
            raise TypeError(f"Only integer scalar arrays can be converted to a scalar index, "
                            f"not an array of {self.dtype}.")
        return int(self._value)

    def __hash__(self):
        raise TypeError("unhashable type: 'Array'. plax arrays are mutable-looking values; "
                        "use a tuple or a NumPy array's bytes as a dictionary key.")

    def __reduce__(self):
        if dtypes.is_extended(self.dtype):
            return (_key_array_rebuilder,
                    (np.asarray(self._physical_value()), self.dtype._impl.name))
        return (_rebuild, (np.asarray(self._value), self.weak_type))

    def __repr__(self):
        if self.is_deleted():
            return "Array(<deleted>)"
        if not self._readable():  # another process holds part of it: its type only
            weak = ", weak_type=True" if self.weak_type else ""
            return f"Array(shape={self.shape}, dtype={self.dtype.name}{weak})"
        if dtypes.is_extended(self.dtype):
            return f"Array({self.shape}, dtype={self.dtype.name}) overlaying:\n" \
                   f"{self._physical_value()}"
        val = self._value
        body = np.array2string(val, separator=", ", prefix="Array(")
        weak = ", weak_type=True" if self.weak_type else ""
        shape = f", shape={self.shape}" if self.size == 0 else ""  # [] alone hides the shape
        return f"Array({body}{shape}, dtype={self.dtype.name}{weak})"

    def __str__(self):
        if dtypes.is_extended(self.dtype) or not self._readable():
            return repr(self)
        return str(self._value)

    def __format__(self, spec):
        if not self._readable():
            return repr(self)  # (its type only: no format applies, as in JAX)
        if dtypes.is_extended(self.dtype):
            return format(str(self), spec)
        if self.ndim == 0:
            return format(self._value[()], spec)
        return format(str(self), spec)

    # --- DLPack (NumPy's and PyTorch's from_dlpack take plax arrays) ---
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if dtypes.is_extended(self.dtype):
            raise TypeError("PRNG key arrays have no DLPack form: export "
                            "plax.random.key_data(keys) instead.")
        devices = self._sharding._device_assignment
        if len(devices) != 1:
            raise BufferError("to_dlpack can only pack a dlpack tensor from an array on a "
                              f"singular device; this one spans {len(devices)} devices. Gather "
                              "it first, e.g. with plax.device_put(x, plax.devices()[0]).")
        if dl_device is not None and tuple(dl_device) != tuple(self.__dlpack_device__()):
            raise BufferError(f"__dlpack__ cannot move the array to dl_device={dl_device}: it "
                              f"lives on {devices[0]}; move it with plax.device_put first.")
        self._check_alive()
        source = self.__copy__() if copy else self
        return xla.to_dlpack(buffer_of(source), stream)

    def __dlpack_device__(self) -> tuple:
        device = self._sharding._device_assignment[0]
        if device.platform == "cpu":
            return DLDeviceType.kDLCPU, 0  # (host memory: one DLPack device)
        kind = DLDeviceType.kDLROCM if device.platform == "rocm" else DLDeviceType.kDLCUDA
        return kind, device.local_hardware_id

    # --- copies: on the same devices, with the same layout and commitment ---
    def __copy__(self):
        self._check_alive()
        s = self._sharding
        if s.is_fully_addressable:
            buf = xla.copy_to_devices(buffer_of(self), s._device_assignment, s)
        else:  # this process copies its own shards (XLA copies only to addressable devices)
            pieces = [xla.copy_to_devices(b, [xla.shard_device(b)],
                                          SingleDeviceSharding(xla.shard_device(b)))
                      for b in xla.shards(buffer_of(self))]
            buf = xla.assemble(buffer_of(self).aval, s, pieces, self._committed)
        return make_array(buf, self.aval, self._committed)

    def __deepcopy__(self, memo):
        return self.__copy__()

    # --- lifetime ---
    def block_until_ready(self):
        self._check_alive()
        if xla.distributed_runtime_joined():  # a dead peer must raise, not trap the wait
            xla.block_until_ready((buffer_of(self),))
        else:
            _cpp_block_until_ready(buffer_of(self))
        return self

    def is_ready(self) -> bool:
        self._check_alive()  # (jaxlib's check of a deleted array crashes the process)
        return _cpp_is_ready(buffer_of(self))

    def _check_alive(self):
        if self.is_deleted():
            raise RuntimeError(f"Array has been deleted with shape="
                               f"{self.aval.str_short(short_dtypes=False)} (it was donated to "
                               "a computation or deleted with .delete()); it cannot be used "
                               "again.")

    _check_if_deleted = _check_alive  # (JAX's name)

    def _check_and_rearrange(self, arrays, sharding, aval) -> list:
        """jaxlib's array constructor asks this of the single-device arrays it is given (see
        ``single_device_arrays_in_order``)."""
        return single_device_arrays_in_order(arrays, sharding, aval)

    def copy_to_host_async(self) -> None:
        self._check_alive()
        xla.copy_to_host_async(buffer_of(self))

    def __plax_array__(self):
        return self


class KeyArray(_ArrayMethods):
    """An array of an extended dtype: PRNG keys (``aval``'s key type over the uint32 array of
    their words), or a user's extended dtype over its representation array. Also
    ``jax.experimental.EArray``: ``EArray(aval, data)``."""

    # ``_consumed_at``: where the key-reuse checker saw these keys consumed (None: fresh).
    __slots__ = ("aval", "_base", "_npy_value", "_consumed_at", "__weakref__")

    def __init__(self, aval: ShapedArray, base):
        self.aval = aval
        self._base = base
        self._npy_value = None
        self._consumed_at = None

    _consumed = property(lambda self: self._consumed_at is not None,
                         doc="Whether the key-reuse checker saw these keys consumed.")

    _sharding = property(lambda self: self._base._sharding)
    _committed = property(lambda self: self._base._committed)

    def is_deleted(self) -> bool:
        return self._base.is_deleted()

    def delete(self) -> None:
        self._base.delete()


xla.attach_methods(ArrayImpl, {k: v for k, v in vars(_ArrayMethods).items()
                               if k not in ("__module__", "__qualname__", "__doc__",
                                            "__slots__", "__dict__", "__weakref__")})
ArrayImpl.__doc__ = "A plax array on devices (jaxlib's C++ array, with plax's methods)."
xla.answer_lookups_in(ArrayImpl, ("unsafe_buffer_pointer", "on_device_size_in_bytes",
                                  "__cuda_array_interface__", "_fully_replicated_shard"))

EArray = KeyArray

# The concrete array types, and every type whose instances are ``plax.Array`` instances (a
# tuple for isinstance: a C-level check, unlike ``plax.Array``'s Python one).
CONCRETE = (ArrayImpl, KeyArray)
ARRAY_TYPES = (ArrayImpl, Tracer, KeyArray)


def buffer_of(x):
    """The jaxlib array holding a concrete array's data (a key array: its words)."""
    return x if type(x) is ArrayImpl else x._base


def single_device_arrays_in_order(arrays, sharding, aval) -> list:
    """JAX's checks of the single-device arrays an array of type ``aval`` laid out by
    ``sharding`` is made of (one per device of the sharding this process holds, each on its
    own device, of ``aval``'s dtype and the shard shape); they are returned in the
    sharding's device order."""
    by_id = {}
    for a in arrays:
        held = a.sharding._device_assignment
        if len(held) != 1:
            raise ValueError("When making an array from single-device arrays the input arrays "
                             f"must have one shard each. An argument array had {len(held)} "
                             "shard(s).")
        by_id[held[0].id] = a
    mine = sharding._addressable_device_assignment
    if len(arrays) != len(mine):
        raise ValueError(f"Expected {len(mine)} per-device arrays (this is how many devices "
                         f"are addressable by the sharding), but got {len(arrays)}")
    if len(by_id) != len(arrays):
        ids = [a.sharding._device_assignment[0].id for a in arrays]
        raise ValueError("When making an array from single-device arrays, the input arrays "
                         f"must be from distinct devices, but got device IDs {ids}")
    wanted = {d.id for d in mine}
    if wanted != set(by_id):
        message = "Addressable devices and per-device arrays devices do not match."
        if wanted - set(by_id):
            message += (f" Sharding contains devices {wanted - set(by_id)} that are not "
                        "present in per-device arrays.")
        if set(by_id) - wanted:
            message += (f" Per-device arrays contain devices {set(by_id) - wanted} that are "
                        "not present in the sharding.")
        raise ValueError(message)
    shard_shape = tuple(sharding.shard_shape(aval.shape))
    for d in mine:
        a = by_id[d.id]
        if a.dtype != aval.dtype:
            raise ValueError(f"Input buffers to `Array` must have matching dtypes. Got "
                             f"{a.dtype}, expected {aval.dtype} for the buffer on {d}.")
        if tuple(a.shape) != shard_shape:
            raise ValueError(f"Expected shard shape {shard_shape} doesn't match the single "
                             f"device array shape {tuple(a.shape)}. Shape of Array is "
                             f"{aval.str_short(short_dtypes=False)} with sharding {sharding}")
    return [by_id[d.id] for d in mine]


def make_array(buf, aval: ShapedArray, committed: bool):
    """The concrete array of type ``aval`` over the jaxlib array ``buf`` (which holds
    ``aval``'s physical type): ``buf`` itself when it already says so."""
    if dtypes.is_extended(aval.dtype):
        if buf._committed != committed:
            buf = xla.rewrap(buf, buf.aval, committed)
        return KeyArray(aval, buf)
    if buf.aval is aval and buf._committed == committed:
        return buf
    return xla.rewrap(buf, aval, committed)


# Stores of arrays plax keeps for itself (device copies of constants), as functions listing
# them: not the user's arrays, so live_arrays() leaves them out, as JAX's lists none of its own.
_internal_stores: list = []


def register_internal_store(list_arrays) -> None:
    """Leave the arrays ``list_arrays()`` returns out of ``all_arrays()``."""
    _internal_stores.append(list_arrays)


def all_arrays() -> list:
    """Every concrete array the program holds (a scan: for rare calls like live_arrays);
    the words under a key array are counted as the key array, and plax's own stores are
    left out."""
    found = [o for o in gc.get_objects() if type(o) in CONCRETE]
    hidden = {id(o._base) for o in found if type(o) is KeyArray}
    for list_arrays in _internal_stores:
        hidden.update(id(a) for a in list_arrays())
    return [o for o in found if id(o) not in hidden]


class _ArrayMeta(type):
    """``isinstance(x, plax.Array)`` holds for concrete arrays and for tracers (traced code
    sees arrays), as in JAX; ``issubclass`` for ``Array`` itself, its subclasses and the
    concrete types, not tracers."""

    def __instancecheck__(cls, x):
        if cls is Array:  # (or an object whose __class__ says it is one: Mock(spec=Array))
            return isinstance(x, ARRAY_TYPES) or type.__instancecheck__(cls, x)
        return type.__instancecheck__(cls, x)

    def __subclasscheck__(cls, sub):
        if cls is Array:  # Array itself and its subclasses, and the concrete types (as JAX's)
            return type.__subclasscheck__(cls, sub) or (
                isinstance(sub, type) and issubclass(sub, CONCRETE))
        return type.__subclasscheck__(cls, sub)


class Array(metaclass=_ArrayMeta):
    """An array on devices: the type to check against and annotate with (``plax.Array``).

    Concrete arrays are ``ArrayImpl`` (or ``KeyArray``) objects; tracers are instances too.
    Create arrays with ``plax.numpy`` (``jnp.array``, ``jnp.zeros``, ...), not this class.
    """

    __slots__ = ()

    def __new__(cls, *args, **kwargs):
        if cls is Array:
            raise TypeError("plax.Array is the type to check arrays against; it makes no "
                            "arrays itself. Create one with plax.numpy.array(...), "
                            "plax.numpy.zeros(...) or plax.device_put(...).")
        return super().__new__(cls)

    def __array_namespace__(self, /, *, api_version=None):
        """The array API namespace of an array (``plax.numpy``), as the array's own method
        (installed by plax.numpy on every array type) gives it: ``plax.Array`` has the
        method too, as ``jax.Array`` does."""
        own = getattr(type(self), "__array_namespace__", None)
        if own is None or own is Array.__array_namespace__:  # a user's subclass of Array
            raise TypeError(f"{type(self).__name__} objects are not arrays: "
                            "__array_namespace__ is defined for plax arrays and tracers.")
        return own(self, api_version=api_version)


def _declared(name: str, is_property: bool):
    """A member every array has, declared on the base class as JAX's base class declares it
    (ArrayImpl, KeyArray and tracers define their own): reached only by a user's subclass
    of Array that lacks it."""
    def missing(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} subclasses plax.Array but does not "
                                  f"define `{name}`.")
    missing.__name__ = name
    return property(missing) if is_property else missing


for _name in ("shape", "dtype", "ndim", "size", "itemsize", "nbytes", "sharding", "device",
              "committed", "addressable_shards", "global_shards", "is_fully_addressable",
              "is_fully_replicated", "flat"):
    setattr(Array, _name, _declared(_name, True))
for _name in ("addressable_data", "copy_to_host_async", "item", "byteswap", "__copy__",
              "__deepcopy__"):
    setattr(Array, _name, _declared(_name, False))


def _rebuild(value, weak_type):
    from plax.runtime.dispatch import array_from_host
    return array_from_host(value, weak_type=weak_type)


def _no_key_arrays(data, impl_name):
    raise RuntimeError(f"cannot rebuild an array of {impl_name} keys: import plax.random (it "
                       "installs how key arrays are unpickled).")


# ``rebuild(key_data, impl_name)``: the key array a pickle holds. Key arrays are made above the
# runtime: plax.random installs it, and a pickle names that function, so unpickling imports it.
_key_array_rebuilder = _no_key_arrays


def install_key_array_rebuilder(rebuild) -> None:
    """Pickle key arrays as ``rebuild(uint32 key data, impl name)`` (a module-level function:
    pickles refer to it by name)."""
    global _key_array_rebuilder
    _key_array_rebuilder = rebuild
