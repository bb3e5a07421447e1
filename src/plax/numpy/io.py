"""Arrays from and to bytes and files: NumPy's ``.npy``/``.npz`` formats and buffers.

These read or write concrete data, so (as in JAX) they work outside transformations only:
a traced value has no bytes to write, and reading a file inside ``jit`` would run once, at
trace time. ``fromiter`` and ``fromfile`` are refused outright, as JAX refuses them.
"""
import numpy as np

from plax.core import dtypes as _dtypes
from plax.numpy.creation import asarray

__all__ = ["save", "savez", "load", "frombuffer", "fromstring", "fromiter", "fromfile"]

# NumPy's writers take anything with ``__array__`` (plax arrays included), as in JAX.
save = np.save
savez = np.savez


def load(file, *args, **kwargs):
    """Read an array saved by ``save`` (``numpy.load``'s arguments) as a plax Array.

    A ``.npy`` file gives a plax Array; bfloat16 data (stored by NumPy as 2-byte void) comes
    back as bfloat16. Data plax cannot hold (strings, objects) and ``.npz`` archives come
    back as NumPy gives them, as in JAX.
    """
    out = np.load(file, *args, **kwargs)
    if not isinstance(out, np.ndarray):
        return out
    if out.dtype == np.dtype("V2"):
        out = out.view(_dtypes.bfloat16)
    if out.dtype not in _dtypes.supported_dtypes:
        return out
    return asarray(out)


def frombuffer(buffer, dtype=float, count=-1, offset=0):
    """A plax Array of the bytes of ``buffer`` read as ``dtype`` (``numpy.frombuffer``)."""
    return asarray(np.frombuffer(buffer=buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string, dtype=float, count=-1, *, sep):
    """A plax Array of the numbers in the text ``string`` split by ``sep``
    (``numpy.fromstring``)."""
    return asarray(np.fromstring(string=string, dtype=dtype, count=count, sep=sep))


def _impure(name: str, source: str):
    def refuse(*args, **kwargs):
        raise NotImplementedError(
            f"jnp.{name}() is not implemented because it may be non-pure and thus unsafe "
            f"for use with JIT and other transformations: it consumes its {source}. Read the "
            f"data with NumPy first, outside any transformation: jnp.asarray(np.{name}(...)).")
    refuse.__name__ = refuse.__qualname__ = name
    refuse.__doc__ = (f"Refused, as in JAX: reading a {source} is a side effect a traced "
                      f"function would perform once, at trace time. Use "
                      f"``jnp.asarray(np.{name}(...))`` outside transformations.")
    return refuse


fromiter = _impure("fromiter", "iterator")
fromfile = _impure("fromfile", "file")
