"""The array API standard's inspection namespace of plax.numpy (``__array_namespace_info__``):
what the namespace can do, its devices, and its dtypes by kind."""
import numpy as np

from plax.core import dtypes

# The standard's dtype kinds and the dtypes of each (as names; 64-bit ones are listed only
# while x64 is on, since only then can an array hold them).
_KINDS = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float32", "float64"),
    "complex floating": ("complex64", "complex128"),
}
_KINDS["integral"] = _KINDS["signed integer"] + _KINDS["unsigned integer"]
_KINDS["numeric"] = _KINDS["integral"] + _KINDS["real floating"] + _KINDS["complex floating"]


def _check_device(device) -> None:
    if device is not None and not hasattr(device, "platform"):
        raise TypeError(f"device must be None or a plax Device, got {device!r}.")


class ArrayNamespaceInfo:
    """Answers the array API's inspection questions for plax.numpy (the same for every
    device: plax gives each device the same dtypes)."""

    def capabilities(self) -> dict:
        """What the namespace supports: no boolean-mask indexing and no data-dependent
        output shapes (shapes are static under jit); arrays of up to 64 dimensions."""
        return {"boolean indexing": False, "data-dependent shapes": False,
                "max dimensions": 64}

    def default_device(self):
        """None: arrays go where plax's default device setting says when they are made."""
        return None

    def devices(self) -> list:
        """None (the default placement) and the devices of every started backend."""
        from plax.runtime import xla
        out = [None]
        for client in xla.backends().values():
            out.extend(client.devices())
        return out

    def default_dtypes(self, *, device=None) -> dict:
        """The dtypes plax.numpy picks when none is asked for, by the standard's kind."""
        _check_device(device)
        integral = dtypes.default_int_dtype()
        return {"real floating": dtypes.default_float_dtype(),
                "complex floating": dtypes.default_complex_dtype(),
                "integral": integral, "indexing": integral}

    def dtypes(self, *, device=None, kind=None) -> dict:
        """``{name: dtype}`` of the dtypes of ``kind`` (a kind name, a tuple of them, or None
        for every kind) that arrays can hold now."""
        _check_device(device)
        if kind is None:
            kinds = ("bool", "numeric")
        elif isinstance(kind, tuple):
            kinds = kind
        else:
            kinds = (kind,)
        for k in kinds:
            if not isinstance(k, str) or k not in _KINDS:
                raise ValueError(f"Unknown dtype kind {k!r}: expected one of {sorted(_KINDS)}, "
                                 "a tuple of them, or None.")
        names = dict.fromkeys(n for k in kinds for n in _KINDS[k])
        held = (np.dtype(n) for n in names)
        return {dt.name: dt for dt in held if dtypes.canonicalize_dtype(dt) == dt}
