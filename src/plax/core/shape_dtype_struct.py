"""``ShapeDtypeStruct``: an array described by its shape and dtype (no data), the argument
``eval_shape``, ``make_jaxpr`` and lowering take in place of an array, and the shape-and-dtype
part of checkify's error effects."""
from __future__ import annotations

import numpy as np

from plax.core import dtypes
from plax.core.symbolic_shapes import DimExpr
from plax.core.trace import get_aval


class ShapeDtypeStruct:
    """A stand-in for an array by shape and dtype, for eval_shape, lowering and make_jaxpr."""

    __slots__ = ("shape", "dtype", "sharding", "weak_type")

    def __init__(self, shape, dtype, sharding=None, weak_type: bool = False):
        if dtype is None:
            raise ValueError("ShapeDtypeStruct: dtype must be specified.")
        self.shape = tuple(d if type(d) is DimExpr else int(d) for d in shape)
        # Kept as given (float64 stays float64, as in JAX); tracing canonicalises it.
        # float0, the tangent type of integers, is allowed too (as in JAX).
        if dtypes.is_extended(dtype) or (isinstance(dtype, np.dtype) and dtype == dtypes.float0):
            self.dtype = dtype
        else:
            self.dtype = dtypes.check_user_dtype(dtype)
        self.sharding = sharding
        self.weak_type = bool(weak_type)

    def update(self, **changes) -> "ShapeDtypeStruct":
        """A copy with some of ``shape``, ``dtype``, ``sharding`` and ``weak_type`` changed."""
        unknown = set(changes) - set(self.__slots__)
        if unknown:
            raise TypeError(f"ShapeDtypeStruct.update() got unexpected keyword arguments "
                            f"{sorted(unknown)}; it takes {list(self.__slots__)}.")
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields.update(changes)
        return type(self)(**fields)

    @classmethod
    def like(cls, x) -> "ShapeDtypeStruct":
        """The ShapeDtypeStruct of ``x`` (an array, a tracer, a NumPy value, another
        ShapeDtypeStruct): its shape, dtype and weak type, and its sharding when ``x`` is
        committed to one."""
        if isinstance(x, ShapeDtypeStruct):
            return cls(x.shape, x.dtype, sharding=x.sharding, weak_type=x.weak_type)
        aval = get_aval(x)
        sharding = None
        if getattr(x, "_committed", True):
            sharding = getattr(x, "sharding", None)
            if sharding is None and hasattr(aval, "sharding"):  # a tracer: its type's sharding
                sharding = aval.sharding
                sharding = None if sharding.mesh.empty else sharding
        return cls(aval.shape, aval.dtype, sharding=sharding,
                   weak_type=getattr(aval, "weak_type", False))

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype and self.sharding == other.sharding
                and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.sharding, self.weak_type))

    def __repr__(self):
        extra = (f", sharding={self.sharding}" if self.sharding is not None else "") + (
            ", weak_type=True" if self.weak_type else "")
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{extra})"
