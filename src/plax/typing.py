"""plax.typing: type annotations for values plax functions accept (as ``jax.typing``)."""
from __future__ import annotations

from typing import Any, Protocol, Union

import numpy as np

from plax.runtime.array import Array


class SupportsDType(Protocol):
    """Anything with a ``dtype`` attribute (NumPy scalar types, ``ShapeDtypeStruct``, ...)."""

    @property
    def dtype(self) -> np.dtype: ...


# What plax.numpy and plax.lax functions take as an array argument. Tracers are
# Arrays to isinstance, so annotations with ArrayLike cover traced values too.
ArrayLike = Union[Array, np.ndarray, np.bool_, np.number, bool, int, float, complex]

# What functions take where they ask for a dtype.
DTypeLike = Union[str, type[Any], np.dtype, SupportsDType]

__all__ = ["ArrayLike", "DTypeLike"]
