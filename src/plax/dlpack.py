"""``plax.dlpack``: arrays from other libraries through DLPack, without a copy where possible.

``from_dlpack(x)`` takes anything with ``__dlpack__`` and ``__dlpack_device__`` (NumPy
arrays, PyTorch tensors, CuPy arrays, plax's own arrays) and returns a plax Array over the
same memory when XLA can use it as it is: a compact layout (a transposition is fine) and
data aligned as XLA wants it (64 bytes on CPU). Otherwise, unless ``copy=False`` forbids
it, the data are copied. plax's arrays give themselves to other libraries through their
``__dlpack__`` (``np.from_dlpack(x)``, ``torch.from_dlpack(x)``).

As in JAX, an array made without a copy shares its memory with the source: mutating the
source afterwards changes what plax reads, which plax (like JAX) leaves undefined.
"""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.runtime import xla
from plax.runtime.array import DLDeviceType

__all__ = ["from_dlpack", "is_supported_dtype"]

SUPPORTED_DTYPES = frozenset(np.dtype(t).name for t in (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128, np.bool_)) | {"bfloat16"}

_PLATFORMS = {DLDeviceType.kDLCPU: "cpu", DLDeviceType.kDLCUDA: "cuda",
              DLDeviceType.kDLCUDAHost: "cuda", DLDeviceType.kDLROCM: "rocm"}


def is_supported_dtype(dtype) -> bool:
    """Whether arrays of ``dtype`` can cross DLPack to and from plax."""
    if dtype is None:
        raise TypeError(f"Expected a string or dtype-like object; got {dtype=}")
    return dtypes.np_dtype(dtype).name in SUPPORTED_DTYPES


def _single_device(device):
    if device is None or not hasattr(device, "device_set"):
        return device
    devices = device.device_set
    if len(devices) > 1:
        raise ValueError("from_dlpack can only unpack a dlpack tensor onto a singular device, "
                         f"but a Sharding with {len(devices)} devices was provided.")
    return next(iter(devices))


def _source_device(external_array):
    kind, device_id = external_array.__dlpack_device__()
    try:
        platform = _PLATFORMS[DLDeviceType(int(kind))]
    except (KeyError, ValueError):
        raise TypeError("Array passed to from_dlpack is on unsupported device type "
                        f"(DLDeviceType: {kind}, array: {type(external_array).__name__}).") \
            from None
    return int(kind), xla.get_backend(platform).device_from_local_hardware_id(int(device_id))


def _ready_stream(kind: int, device):
    """The stream the producer must make its data ready on (None on CPU)."""
    if kind in (DLDeviceType.kDLCPU, DLDeviceType.kDLCUDAHost):
        return None
    try:
        return device.get_stream_for_external_ready_events()
    except xla.XlaRuntimeError as e:
        if "UNIMPLEMENTED" in str(e):
            return None
        raise


def from_dlpack(external_array, device=None, copy: bool | None = None):
    """A plax Array of ``external_array``'s data (an object with ``__dlpack__`` and
    ``__dlpack_device__``), sharing its memory unless a copy is asked for (``copy=True``)
    or needed (another ``device``, an unaligned or strided buffer: refused if
    ``copy=False``). The result is committed to its device, as JAX's is."""
    device = _single_device(device)
    if not (hasattr(external_array, "__dlpack__") and
            hasattr(external_array, "__dlpack_device__")):
        raise TypeError("The array passed to from_dlpack must have __dlpack__ and "
                        f"__dlpack_device__ methods; got {type(external_array).__name__}. "
                        "(For host data, plax.numpy.asarray copies it.)")
    kind, source = _source_device(external_array)
    moving = device is not None and device != source
    if moving and copy is False:
        raise ValueError(f"Specified device={device} which requires a copy since the source "
                         f"device is {source!r}, however copy=False. Set copy=True or "
                         "copy=None to perform the requested operation.")
    stream = _ready_stream(kind, source)
    capsule = external_array.__dlpack__(stream=stream)
    copied = False
    try:
        # (jaxlib 0.10 shares aligned memory even when told to copy: plax copies below)
        arr = xla.from_dlpack(capsule, source, stream, False if copy is False else None, kind)
    except xla.XlaRuntimeError as e:
        arr, copied = _copied_or_refused(external_array, e, kind, source, copy), True
    if copy and not copied and not moving:
        arr = arr.__copy__()  # as documented: copy=True always copies
    canonical = dtypes.canonicalize_dtype(arr.dtype)
    if canonical != arr.dtype:  # 64-bit data with x64 off: narrowed, as JAX does
        import plax.numpy as jnp
        arr = jnp.asarray(arr, dtype=canonical)
    if moving:
        from plax.api.devices import device_put
        arr = device_put(arr, device)
    return arr


def _copied_or_refused(external_array, error, kind, source, copy):
    """What to do when XLA cannot take the memory as it is: copy it (unless ``copy=False``)."""
    text = str(error)
    if "is not aligned to" in text:
        why = f"the source data buffer {text[text.index('is not aligned to'):]}"
    elif "trivial (compact) striding" in text:
        why = "its strides are not those of a compact array (a strided view)"
    else:
        raise error
    if copy is False or kind != DLDeviceType.kDLCPU:
        raise ValueError(f"Specified input which requires a copy since {why}. However "
                         f"copy={copy}: set copy=True or copy=None to perform the requested "
                         "operation, or pass a contiguous array.") from error
    host = np.array(np.from_dlpack(external_array), order="C")  # a fresh, compact copy
    return xla.from_dlpack(host.__dlpack__(), source, None, None, kind)
