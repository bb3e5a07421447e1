"""``jax._src.state.types``: the abstract type of a mutable array reference.

plax has no mutable references yet, so no value's type is an ``AbstractRef``: checks such
as ``isinstance(jax.typeof(x), AbstractRef)`` answer False for every plax value, which is
the truth.
"""
from plax.core.avals import AbstractValue as _AbstractValue


class AbstractRef(_AbstractValue):
    """The type of a mutable reference to an array of type ``inner_aval``."""

    def __init__(self, inner_aval):
        self.inner_aval = inner_aval

    @property
    def shape(self):
        return self.inner_aval.shape

    @property
    def dtype(self):
        return self.inner_aval.dtype

    def __repr__(self):
        return f"Ref{{{self.inner_aval.str_short()}}}"
