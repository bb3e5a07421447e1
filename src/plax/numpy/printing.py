"""plax.numpy's printing options: plax arrays print through NumPy, so NumPy's options rule.

``repr``/``str`` of a plax Array format its value with ``numpy.array2string``, so whatever
``set_printoptions`` or a ``printoptions`` block sets (precision, threshold, linewidth,
suppress, ...) applies to plax arrays as it does to NumPy's. ``array_str``/``array_repr`` are
NumPy's functions, which read a plax array through ``__array__``.
"""
import numpy as np

__all__ = ["printoptions", "set_printoptions", "get_printoptions", "array_str", "array_repr"]

array_str = np.array_str
array_repr = np.array_repr


def printoptions(*args, **kwargs):
    """A context manager setting NumPy's print options (see ``numpy.printoptions``) for the
    block it guards; plax arrays printed inside it follow them."""
    return np.printoptions(*args, **kwargs)


def set_printoptions(*args, **kwargs):
    """Set NumPy's print options (see ``numpy.set_printoptions``); plax arrays follow them."""
    return np.set_printoptions(*args, **kwargs)


def get_printoptions():
    """The current NumPy print options (a dict), which plax arrays print with."""
    return np.get_printoptions()
