"""Index helpers: indices, ix_, unravel_index, ravel_multi_index, triangle and diagonal
indices, mask_indices, fill_diagonal, fromfunction, mgrid and ogrid."""
from __future__ import annotations

import operator

import numpy as np

from plax import lax
from plax.core import dtypes
from plax.core.errors import ConcretizationTypeError
from plax.core.trace import Tracer, get_aval
from plax.numpy import creation, shape_ops, sorting, ufuncs
from plax.numpy.util import as_operand, check_arraylike, convert, shape_of

__all__ = ["indices", "ix_", "unravel_index", "ravel_multi_index", "tril_indices",
           "triu_indices", "tril_indices_from", "triu_indices_from", "diag_indices",
           "diag_indices_from", "mask_indices", "fill_diagonal", "fromfunction", "mgrid",
           "ogrid", "s_", "index_exp", "r_", "c_", "put_along_axis"]


def _static_int(x, name: str, fn: str) -> int:
    if isinstance(x, Tracer):
        val = x.to_concrete_value()
        if val is None:
            raise ConcretizationTypeError(x, f"The {name} argument of {fn} must be static.")
        x = val
    try:
        return operator.index(np.asarray(x).item() if isinstance(x, np.ndarray) else x)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an integer, got {x!r}.") from None


def _dims(shape, name: str, fn: str) -> tuple:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        return tuple(_static_int(d, name, fn) for d in shape)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be a sequence of integers, got {shape!r}.") from None


def _index_array(values):
    return creation.asarray(np.asarray(values, dtypes.default_int_dtype()))


def indices(dimensions, dtype=None, sparse: bool = False):
    """The index grid of an array of shape ``dimensions``: one array per axis, stacked
    (shape ``(len(dimensions), *dimensions)``) or, with ``sparse``, broadcastable pieces."""
    dims = _dims(dimensions, "dimensions", "indices")
    if any(d < 0 for d in dims):
        raise ValueError(f"indices: dimensions must be non-negative, got {dims}.")
    dt = dtypes.default_int_dtype() if dtype is None else dtypes.canonicalize_user_dtype(dtype)
    outs = []
    for i, n in enumerate(dims):
        shape = [1] * len(dims) if sparse else list(dims)
        shape[i] = n
        outs.append(lax.broadcasted_iota(dt, tuple(shape), i))
    if sparse:
        return tuple(outs)
    if not outs:
        return creation.zeros((0,), dt)
    return shape_ops.stack(outs)


def ix_(*args):
    """Open-mesh index arrays from 1-D sequences: the i-th result has shape
    ``(1, ..., len(args[i]), ..., 1)``."""
    check_arraylike("ix_", *args)
    n = len(args)
    out = []
    for i, a in enumerate(args):
        a = creation.asarray(a)
        aval = get_aval(a)
        if aval.ndim != 1:
            raise ValueError(f"Cross index must be 1 dimensional, got argument {i} of shape "
                             f"{aval.shape}.")
        if dtypes.is_bool(aval.dtype):
            raise NotImplementedError("Boolean arguments to jax.numpy.ix_ are not implemented")
        shape = [1] * n
        shape[i] = aval.shape[0]
        out.append(lax.reshape(a, tuple(shape)))
    return tuple(out)


def unravel_index(indices, shape):
    """The coordinates in an array of ``shape`` of each flat index in ``indices``.
    As in JAX, negative indices count from the end and out-of-range ones are clipped."""
    check_arraylike("unravel_index", indices)
    dims = _dims(shape, "shape", "unravel_index")
    if any(d < 0 for d in dims):
        raise ValueError(f"unravel_index: shape must be non-negative, got {dims}.")
    idx = as_operand(indices)
    if not dims:
        return ()
    total = int(np.prod(dims))
    idx = ufuncs.where(ufuncs.less(idx, 0), ufuncs.add(idx, total), idx)
    idx = ufuncs.clip(idx, 0, max(total - 1, 0))
    out = []
    for d in reversed(dims):
        d = max(d, 1)
        out.append(ufuncs.remainder(idx, d))
        idx = ufuncs.floor_divide(idx, d)
    return tuple(reversed(out))


def ravel_multi_index(multi_index, dims, mode: str = "raise", order: str = "C", *, dtype=None):
    """Flat indices into an array of shape ``dims`` from a tuple of coordinate arrays.
    ``mode``: 'raise' (concrete input only), 'wrap' or 'clip'; ``order``: 'C' or 'F'."""
    dims = _dims(dims, "dims", "ravel_multi_index")
    multi_index = tuple(multi_index)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: multi_index has {len(multi_index)} arrays but "
                         f"dims has {len(dims)} entries.")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"ravel_multi_index: invalid mode={mode!r}; expected 'raise', 'wrap' "
                         "or 'clip'.")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: invalid order={order!r}; expected 'C' or 'F'.")
    check_arraylike("ravel_multi_index", *multi_index)
    idxs = [as_operand(i) for i in multi_index]
    for i in idxs:
        dt = dtypes.result_type(i)
        if not dtypes.is_integer(dt):
            raise TypeError(f"ravel_multi_index: multi_index entries must be integers, got "
                            f"dtype={dt}.")
    if dtype is None:
        dtype = dtypes.result_type(*idxs) if idxs else dtypes.default_int_dtype()
    else:
        dtype = dtypes.canonicalize_user_dtype(dtype)
    if mode == "raise":
        for i, d in zip(idxs, dims):
            if isinstance(i, Tracer) and i.to_concrete_value() is None:
                raise ConcretizationTypeError(
                    i, "The error occurred because ravel_multi_index was jit-compiled with "
                       "mode='raise'. Use mode='wrap' or mode='clip' instead.")
            host = np.asarray(i.to_concrete_value() if isinstance(i, Tracer) else i)
            if np.any((host < 0) | (host >= d)):
                raise ValueError("invalid entry in coordinates array")
    elif mode == "wrap":
        idxs = [ufuncs.remainder(i, d) for i, d in zip(idxs, dims)]
    else:
        idxs = [ufuncs.clip(i, 0, max(d - 1, 0)) for i, d in zip(idxs, dims)]
    order_dims = list(range(len(dims)))[::-1] if order == "C" else list(range(len(dims)))
    out, stride = None, 1
    for k in order_dims:
        term = ufuncs.multiply(convert(creation.asarray(idxs[k]), dtype), stride)
        out = term if out is None else ufuncs.add(out, term)
        stride *= dims[k]
    if out is None:
        return creation.zeros((), dtype)
    return creation.asarray(out)


def _tri_indices(name, n, k, m, lower: bool):
    n = _static_int(n, "n", name)
    k = _static_int(k, "k", name)
    m = n if m is None else _static_int(m, "m", name)
    if n < 0 or m < 0:
        raise ValueError(f"{name}: n and m must be non-negative, got n={n}, m={m}.")
    rows, cols = np.meshgrid(np.arange(n), np.arange(m), indexing="ij")
    mask = (cols <= rows + k) if lower else (cols >= rows + k)
    return _index_array(rows[mask]), _index_array(cols[mask])


def tril_indices(n, k=0, m=None):
    """Row and column indices of the lower triangle (at and below diagonal ``k``) of an
    (n, m) array."""
    return _tri_indices("tril_indices", n, k, m, True)


def triu_indices(n, k=0, m=None):
    """Row and column indices of the upper triangle (at and above diagonal ``k``) of an
    (n, m) array."""
    return _tri_indices("triu_indices", n, k, m, False)


def _shape_2d(name, arr):
    shape = tuple(arr.shape) if hasattr(arr, "shape") else shape_of(as_operand(arr))
    if len(shape) != 2:
        raise ValueError(f"{name}: input array must be 2-d, got shape {shape}.")
    return shape


def tril_indices_from(arr, k=0):
    """``tril_indices`` for the shape of the 2-D ``arr``."""
    n, m = _shape_2d("tril_indices_from", arr)
    return tril_indices(n, k, m)


def triu_indices_from(arr, k=0):
    """``triu_indices`` for the shape of the 2-D ``arr``."""
    n, m = _shape_2d("triu_indices_from", arr)
    return triu_indices(n, k, m)


def diag_indices(n, ndim: int = 2):
    """Indices of the main diagonal of an ``ndim``-dimensional array of side ``n``."""
    n = _static_int(n, "n", "diag_indices")
    ndim = _static_int(ndim, "ndim", "diag_indices")
    if n < 0:
        raise ValueError(f"n argument to diag_indices must be nonnegative, got {n}")
    if ndim < 0:
        raise ValueError(f"ndim argument to diag_indices must be nonnegative, got {ndim}")
    return (lax.iota(dtypes.default_int_dtype(), n),) * ndim


def diag_indices_from(arr):
    """``diag_indices`` for ``arr``, which must have at least 2 axes, all equal."""
    check_arraylike("diag_indices_from", arr)
    shape = shape_of(as_operand(arr))
    if len(shape) < 2:
        raise ValueError("diag_indices_from: input array must be at least 2-d")
    if len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    return diag_indices(shape[0], len(shape))


def mask_indices(n, mask_func, k=0, *, size=None):
    """Indices where ``mask_func(ones((n, n)), k)`` is nonzero (e.g. ``mask_func=triu``)."""
    n = _static_int(n, "n", "mask_indices")
    if not callable(mask_func):
        raise TypeError(f"mask_indices: mask_func must be callable, got {mask_func!r}.")
    mask = mask_func(creation.ones((n, n), np.bool_), k)
    return sorting.nonzero(mask, size=size)


def fill_diagonal(a, val, wrap: bool = False, *, inplace: bool = True):
    """A copy of ``a`` with its main diagonal set to ``val`` (repeated as needed).
    Arrays are immutable: pass ``inplace=False``."""
    if inplace:
        raise NotImplementedError("JAX arrays are immutable, must use inplace=False")
    if wrap:
        raise NotImplementedError("wrap=True is not implemented, must use wrap=False")
    check_arraylike("fill_diagonal", a, val)
    a = creation.asarray(a)
    shape = get_aval(a).shape
    if len(shape) < 2:
        raise ValueError("array must be at least 2-d")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    n = min(shape)
    v = shape_ops.ravel(creation.asarray(val))
    nv = get_aval(v).shape[0]
    if n == 0:
        return a
    if nv == 0:
        raise ValueError("fill_diagonal: val must not be empty.")
    if nv != n:
        v = sorting.take_rows(v, lax.rem(lax.iota(np.int32, n), np.int32(nv)))
    idx = lax.iota(np.int32, n)
    return a.at[(idx,) * len(shape)].set(v)


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """``function(*coords, **kwargs)`` where ``coords`` are the index grids of ``shape``
    in ``dtype``."""
    if not callable(function):
        raise TypeError(f"fromfunction: function must be callable, got {function!r}.")
    coords = indices(_dims(shape, "shape", "fromfunction"), dtype=dtype)
    return function(*shape_ops.unstack(coords) if get_aval(coords).shape[0] else (), **kwargs)


def _grid_axis(s):
    if not isinstance(s, slice):
        raise TypeError(f"grid indices must be slices, got {s!r}.")
    start = 0 if s.start is None else s.start
    step = 1 if s.step is None else s.step
    for name, v in (("start", start), ("stop", s.stop), ("step", step)):
        if isinstance(v, Tracer):
            raise ConcretizationTypeError(v, f"The slice {name} of mgrid/ogrid must be static.")
    if s.stop is None:
        raise ValueError("grid slices need a stop value.")
    if isinstance(step, complex) or np.iscomplexobj(step):
        num = int(abs(complex(step).imag))
        return creation.linspace(start, s.stop, num, endpoint=True)
    return creation.arange(start, s.stop, step)


class _Grid:
    def __init__(self, sparse: bool, name: str):
        self.sparse, self.name = sparse, name

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _grid_axis(key)
        axes = [_grid_axis(s) for s in key]
        if not axes:
            return [] if self.sparse else creation.zeros((0,), dtypes.default_int_dtype())
        dt = dtypes.result_type(*axes)
        axes = [convert(x, dt) for x in axes]
        grids = creation.meshgrid(*axes, indexing="ij", sparse=self.sparse)
        return list(grids) if self.sparse else shape_ops.stack(grids)

    def __repr__(self):
        return f"plax.numpy.{self.name}"


mgrid = _Grid(False, "mgrid")
mgrid.__doc__ = "Dense index grids from slices: ``mgrid[0:2, 0:3]`` (a complex step is a count)."
ogrid = _Grid(True, "ogrid")
ogrid.__doc__ = "Open (sparse) index grids from slices: ``ogrid[0:2, 0:3]``."


_sparse_indices = indices

# --- index expressions and concatenation helpers ------------------------------------------
s_ = np.s_
index_exp = np.index_exp


def _make_1d_grid_from_slice(s: slice, op_name: str):
    for name, v in (("start", s.start), ("stop", s.stop), ("step", s.step)):
        if isinstance(v, Tracer) and v.to_concrete_value() is None:
            raise ConcretizationTypeError(v, f"The slice {name} of jnp.{op_name} must be static.")
    conc = [v.to_concrete_value() if isinstance(v, Tracer) else v
            for v in (s.start, s.stop, s.step)]
    start, stop, step = conc[0] or 0, conc[1], conc[2] or 1
    if np.iscomplex(step):
        return creation.linspace(start, stop, int(abs(step)))
    return creation.arange(start, stop, step)


class _AxisConcat:
    """Concatenates slices, scalars and array-like objects along an axis (``r_``, ``c_``).

    A leading string directive sets the parameters: ``'r'``/``'c'`` make a 2-D row/column
    matrix of a 1-D result; ``'axis[,ndmin[,trans1d]]'`` sets the concatenation axis, the
    minimum rank of each piece and where a piece's own axes go when it is padded."""
    axis: int
    ndmin: int
    trans1d: int
    op_name: str

    def __getitem__(self, key):
        key_tup = key if isinstance(key, tuple) else (key,)
        params = [self.axis, self.ndmin, self.trans1d, -1]
        if not key_tup:
            raise IndexError(f"jnp.{self.op_name} needs at least one item.")
        directive = key_tup[0]
        if isinstance(directive, str):
            key_tup = key_tup[1:]
            if directive == "r":
                params[-1] = 0
            elif directive == "c":
                params[-1] = 1
            else:
                vec = directive.split(",")
                k = len(vec)
                vec = vec + params[k:] if k < 4 else vec[:3] + [params[-1]]
                try:
                    params = [int(v) for v in vec]
                except ValueError as err:
                    raise ValueError(f"could not understand directive {directive!r}") from err
        axis, ndmin, trans1d, matrix = params
        output = []
        for item in key_tup:
            if isinstance(item, slice):
                newobj = _make_1d_grid_from_slice(item, self.op_name)
                item_ndim = 0
            elif isinstance(item, str):
                raise ValueError("string directive must be placed at the beginning")
            else:
                newobj = creation.array(item, copy=False)
                item_ndim = len(get_aval(newobj).shape)
            newobj = creation.array(newobj, copy=False, ndmin=ndmin)
            if trans1d != -1 and ndmin - item_ndim > 0:
                shape_obj = tuple(range(ndmin))
                num_lshifts = ndmin - abs(ndmin + trans1d + 1) % ndmin
                shape_obj = shape_obj[num_lshifts:] + shape_obj[:num_lshifts]
                newobj = shape_ops.transpose(newobj, shape_obj)
            output.append(newobj)
        res = shape_ops.concatenate(tuple(output), axis=axis)
        if matrix != -1 and len(get_aval(res).shape) == 1:
            res = shape_ops.expand_dims(res, matrix)
        return res

    def __len__(self) -> int:
        return 0


class RClass(_AxisConcat):
    """Concatenates slices (``start:stop:step`` as ``arange``, a complex step as a
    ``linspace`` count), scalars and arrays along the first axis: ``r_[1:4, 0, x]``."""
    axis = 0
    ndmin = 1
    trans1d = -1
    op_name = "r_"

    def __repr__(self):
        return "plax.numpy.r_"


class CClass(_AxisConcat):
    """Concatenates slices, scalars and arrays along the last axis, each raised to at least
    2-D with its own axes first (1-D pieces become columns): ``c_[x, y]``."""
    axis = -1
    ndmin = 2
    trans1d = 0
    op_name = "c_"

    def __repr__(self):
        return "plax.numpy.c_"


r_ = RClass()
c_ = CClass()


def put_along_axis(arr, indices, values, axis, inplace: bool = True, *, mode=None):
    """A copy of ``arr`` with ``values`` written at ``indices`` along ``axis`` (the inverse
    of ``take_along_axis``; ``axis=None`` works on the flattened array). Arrays are
    immutable: pass ``inplace=False``."""
    if inplace:
        raise ValueError(
            "jax.numpy.put_along_axis cannot modify arrays in-place, because JAX arrays"
            "are immutable. Pass inplace=False to instead return an updated array.")
    check_arraylike("put_along_axis", arr, indices, values)
    arr = creation.asarray(arr)
    indices = creation.asarray(indices)
    values = creation.asarray(values)
    original_axis = axis
    original_shape = tuple(get_aval(arr).shape)
    if axis is None:
        arr = shape_ops.ravel(arr)
        axis = 0
    arr_ndim = len(get_aval(arr).shape)
    idx_shape = tuple(get_aval(indices).shape)
    if arr_ndim != len(idx_shape):
        raise ValueError(
            "put_along_axis arguments 'arr' and 'indices' must have same ndim. Got "
            f"arr.ndim={arr_ndim} and indices.ndim={len(idx_shape)}.")
    try:
        values = shape_ops.broadcast_to(values, idx_shape)
    except ValueError:
        raise ValueError(
            "put_along_axis argument 'values' must be broadcastable to 'indices'. Got "
            f"values.shape={tuple(get_aval(values).shape)} and indices.shape={idx_shape}."
        ) from None
    axis = operator.index(axis)
    if not -arr_ndim <= axis < arr_ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {arr_ndim}")
    if axis < 0:
        axis += arr_ndim
    idx = list(_sparse_indices(tuple(get_aval(arr).shape), sparse=True))
    idx[axis] = indices
    result = arr.at[tuple(idx)].set(values, mode=mode)
    if original_axis is None:
        result = shape_ops.reshape(result, original_shape)
    return result


