"""``sparsify``: run a function written for dense arrays on BCOO arrays.

The function is traced to a jaxpr on the dense types of its arguments, then the jaxpr is
evaluated with each value either dense or sparse (BCOO buffers). An equation whose
operands are all dense binds its primitive as usual; one with a sparse operand runs the
primitive's sparse rule (``sparse_rules_bcoo``), which returns sparse or dense values.
Primitives without a rule raise NotImplementedError, saying whether the result would
have been dense. BCOO's arithmetic operators, ``sum`` and ``astype`` are sparsified
``plax.numpy`` functions, attached at the end of this module.
"""
from __future__ import annotations

import functools

from plax import lax
from plax import numpy as jnp
from plax import tree_util
from plax.core.avals import ShapedArray
from plax.core.jaxpr import Literal
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import get_aval
from plax.experimental.sparse.api import todense_p
from plax.experimental.sparse.bcoo import (BCOO, bcoo_dot_general, bcoo_multiply_sparse,
                                           bcoo_reduce_sum, bcoo_sum_duplicates, bcoo_transpose,
                                           multiply_dense_bufs)
from plax.higher_order.custom_derivatives import custom_jvp_call_p
from plax.higher_order.pjit import pjit_p

__all__ = ["sparsify", "sparse_rules_bcoo", "SparseValue"]


class SparseValue:
    """One value of the sparse interpreter: a dense array (``indices`` None) or the buffers
    and static description of a BCOO array."""

    __slots__ = ("shape", "data", "indices", "indices_sorted", "unique_indices", "pattern")

    def __init__(self, shape, data, indices=None, indices_sorted=False, unique_indices=False,
                 pattern=None):
        self.shape = tuple(shape)
        self.data, self.indices = data, indices
        self.indices_sorted, self.unique_indices = indices_sorted, unique_indices
        # Values derived from one another inside one evaluation share their indices: rules
        # then combine their data directly (values entering separately never do, as in JAX).
        self.pattern = object() if pattern is None else pattern

    def same_indices(self, other) -> bool:
        return self.pattern is other.pattern

    @property
    def is_sparse(self) -> bool:
        return self.indices is not None

    @property
    def aval(self) -> ShapedArray:
        data = get_aval(self.data)
        return ShapedArray(self.shape, data.dtype, data.weak_type)

    @classmethod
    def of(cls, x) -> "SparseValue":
        if isinstance(x, BCOO):
            return cls(x.shape, x.data, x.indices, x.indices_sorted, x.unique_indices)
        x = jnp.asarray(x)
        return cls(get_aval(x).shape, x)

    def array(self):
        """The BCOO array or dense array this value stands for."""
        if not self.is_sparse:
            return self.data
        return BCOO((self.data, self.indices), shape=self.shape,
                    indices_sorted=self.indices_sorted, unique_indices=self.unique_indices)

    def with_data(self, data) -> "SparseValue":
        """The same indices holding other data (of the same shape)."""
        return SparseValue(self.shape, data, self.indices, self.indices_sorted,
                           self.unique_indices, self.pattern)


def _is_bcoo(x) -> bool:
    return isinstance(x, BCOO)


# --- the interpreter ----------------------------------------------------------------------------
sparse_rules_bcoo: dict = {}


def eval_sparse(jaxpr, consts, values):
    """Evaluate ``jaxpr`` on ``values`` (SparseValues; the constants are dense)."""
    env = {}

    def read(v):
        return SparseValue.of(v.value()) if isinstance(v, Literal) else env[v]

    for var, c in zip(jaxpr.constvars, consts):
        env[var] = SparseValue.of(c)
    for var, val in zip(jaxpr.invars, values):
        env[var] = val
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        prim = eqn.primitive
        if any(x.is_sparse for x in ins):
            rule = sparse_rules_bcoo.get(prim)
            if rule is None:
                _unimplemented(prim)
            outs = rule(*ins, **eqn.params)
        else:
            out = prim.bind(*[x.data for x in ins], **eqn.params)
            outs = [SparseValue.of(o) for o in (out if prim.multiple_results else [out])]
        for var, val in zip(eqn.outvars, outs):
            env[var] = val
    return [read(v) for v in jaxpr.outvars]


def sparsify(f, use_tracer: bool = False):
    """``f`` made to accept BCOO arrays anywhere among its (pytree) arguments.

    ``f`` runs on the dense types of its arguments; wherever a BCOO value meets a primitive
    with a sparse rule the work stays sparse (elementwise ops that keep zeros, products,
    sums, transposes, ...), and the results are BCOO or dense arrays accordingly. Keyword
    arguments are passed through as static values. (``use_tracer`` is accepted for JAX's
    signature; plax always interprets the traced jaxpr.)
    """
    del use_tracer

    @functools.wraps(f)
    def wrapped(*args, **params):
        values = tree_util.tree_map(SparseValue.of, args, is_leaf=_is_bcoo)
        flat, in_tree = tree_util.tree_flatten(values,
                                               is_leaf=lambda x: isinstance(x, SparseValue))
        out_tree = []

        def flat_fun(*xs):
            out = f(*tree_util.tree_unflatten(in_tree, list(xs)), **params)
            leaves, tree = tree_util.tree_flatten(out)
            out_tree.append(tree)
            return leaves

        jaxpr, consts = trace_to_jaxpr(flat_fun, [v.aval for v in flat],
                                       description=f"sparsify({getattr(f, '__name__', f)})")
        outs = eval_sparse(jaxpr, consts, flat)
        return tree_util.tree_unflatten(out_tree[0], [o.array() for o in outs])
    return wrapped


# --- sparse rules -------------------------------------------------------------------------------
_DENSIFYING = frozenset(["acos", "acosh", "bessel_i0e", "cos", "cosh", "eq", "exp", "ge", "gt",
                         "le", "lt", "log", "ne", "xor"])


def _unimplemented(prim):
    if prim.name in _DENSIFYING:
        raise NotImplementedError(
            f"sparse rule for {prim} is not implemented because it would result in dense "
            "output. If this is your intent, use sparse.todense() to convert your arguments to "
            "dense matrices.")
    raise NotImplementedError(f"sparse rule for {prim} is not implemented.")


def _unique(x: SparseValue) -> SparseValue:
    """``x`` with repeated indices merged, so that an elementwise map of its data is right."""
    if not x.is_sparse or x.unique_indices:
        return x
    arr = x.array()
    return SparseValue.of(bcoo_sum_duplicates(arr, nse=arr.nse))


def _zero_preserving_unary(prim, linear: bool):
    def rule(x, **params):
        if not linear:
            x = _unique(x)
        return [x.with_data(prim.bind(x.data, **params))]
    sparse_rules_bcoo[prim] = rule


for _p in (lax.conj_p, lax.copy_p, lax.imag_p, lax.neg_p, lax.real_p):
    _zero_preserving_unary(_p, linear=True)
for _p in (lax.abs_p, lax.asin_p, lax.asinh_p, lax.atan_p, lax.atanh_p, lax.bessel_i1e_p,
           lax.expm1_p, lax.log1p_p, lax.sign_p, lax.sin_p, lax.sinh_p, lax.sqrt_p,
           lax.square_p, lax.tan_p, lax.tanh_p, lax.convert_element_type_p):
    _zero_preserving_unary(_p, linear=False)


def _integer_pow(x, *, y):
    if y <= 0:
        raise NotImplementedError(
            f"sparse rule for {lax.integer_pow_p} with non-positive exponent {y} is not "
            "implemented because it would result in dense output. If this is your intent, use "
            "sparse.todense() to convert your argument to a dense array.")
    x = _unique(x)
    return [x.with_data(lax.integer_pow_p.bind(x.data, y=y))]


sparse_rules_bcoo[lax.integer_pow_p] = _integer_pow


def _add(x, y, **params):
    out_shape = tuple(jnp.broadcast_shapes(x.shape, y.shape))
    if x.is_sparse and y.is_sparse:
        if x.shape != y.shape:
            raise NotImplementedError("Addition between sparse matrices of different shapes.")
        if x.same_indices(y):
            return [x.with_data(lax.add(x.data, y.data))]
        xi, yi = get_aval(x.indices), get_aval(y.indices)
        if xi.ndim != yi.ndim or get_aval(x.data).ndim != get_aval(y.data).ndim:
            raise NotImplementedError("Addition between sparse matrices with different "
                                      "batch/dense dimensions.")
        n_batch = xi.ndim - 2
        xd, yd, xind, yind = _common_batch(x.data, y.data, x.indices, y.indices, n_batch)
        data = lax.concatenate([xd, yd], n_batch)
        indices = lax.concatenate([xind, yind], n_batch)
        return [SparseValue(x.shape, data, indices)]
    sp, dense = (x, y) if x.is_sparse else (y, x)
    if dense.shape != out_shape:
        raise NotImplementedError(
            "Addition between a sparse array X and a dense array Y is not implemented when the "
            "output shape is larger than Y.shape. This is to prevent silent densification of a "
            "large sparse array. If this is your intent, you can explicitly cast the sparse "
            "array to a dense matrix.")
    return [SparseValue.of(sp.array().todense() + dense.data)]


def _common_batch(xd, yd, xi, yi, n_batch):
    """Buffers of two BCOO arrays broadcast to common batch sizes (to be concatenated)."""
    sizes = [max(get_aval(b).shape[k] for b in (xd, yd, xi, yi)) for k in range(n_batch)]

    def full(b):
        shape = get_aval(b).shape
        return jnp.broadcast_to(b, tuple(sizes) + shape[n_batch:])
    return full(xd), full(yd), full(xi), full(yi)


def _sub(x, y, **params):
    if x.is_sparse and y.is_sparse:
        return _add(x, y.with_data(lax.neg(y.data)))
    raise NotImplementedError("Subtraction between sparse and dense array.")


def _mul(x, y, **params):
    if x.is_sparse and y.is_sparse:
        if x.same_indices(y) and x.unique_indices:
            return [x.with_data(lax.mul(x.data, y.data))]
        out = bcoo_multiply_sparse(x.array(), y.array())
        return [SparseValue(out.shape, out.data, out.indices)]
    sp, dense = (x, y) if x.is_sparse else (y, x)
    return [sp.with_data(multiply_dense_bufs(sp.data, sp.indices, dense.data,
                                             spinfo=sp.array()._info))]


def _div(x, y, **params):
    if y.is_sparse:
        raise NotImplementedError(
            "Division by a sparse array is not implemented because it would result in dense "
            "output. If this is your intent, use sparse.todense() to convert your arguments to "
            "a dense array.")
    one = jnp.ones((), get_aval(y.data).dtype)
    return [x.with_data(multiply_dense_bufs(x.data, x.indices, lax.div(one, y.data),
                                            spinfo=x.array()._info))]


def _dot_general(x, y, *, dimension_numbers, precision=None, preferred_element_type=None,
                 **params):
    out = bcoo_dot_general(x.array(), y.array(), dimension_numbers=dimension_numbers,
                           preferred_element_type=preferred_element_type)
    return [SparseValue.of(out)]


def _reduce_sum(x, *, axes, **params):
    out = bcoo_reduce_sum(x.array(), axes=axes)
    if out.shape == ():
        return [SparseValue.of(jnp.sum(out.data, dtype=out.dtype))]
    return [SparseValue.of(out)]


def _transpose(x, *, permutation):
    return [SparseValue.of(bcoo_transpose(x.array(), permutation=permutation))]


def _todense(*values, tree):
    return [SparseValue.of(values[0].array().todense())]


def _inline(*values, jaxpr, **params):
    """pjit: the body evaluated in place (sparse values flow through it)."""
    return eval_sparse(jaxpr.jaxpr, jaxpr.consts, list(values))


def _inline_custom_jvp(*values, call_jaxpr, num_consts=0, **params):
    """A custom_jvp function's body evaluated in place: the result is its primal computation
    (the custom derivative rule is not kept)."""
    return eval_sparse(call_jaxpr.jaxpr, call_jaxpr.consts, list(values))


sparse_rules_bcoo.update({
    lax.add_p: _add, lax.sub_p: _sub, lax.mul_p: _mul, lax.div_p: _div,
    lax.dot_general_p: _dot_general, lax.reduce_sum_p: _reduce_sum,
    lax.transpose_p: _transpose, todense_p: _todense, pjit_p: _inline,
    custom_jvp_call_p: _inline_custom_jvp,
})


# --- BCOO methods made by sparsify ----------------------------------------------------------------
def _swap(f):
    return lambda a, b: f(b, a)


def _sum(self, *args, **kwargs):
    """The sum over ``axis`` (all by default): BCOO, or dense when every axis is summed."""
    return sparsify(lambda x: x.sum(*args, **kwargs))(self)


def _astype(self, *args, **kwargs):
    """The array converted to another dtype."""
    return sparsify(lambda x: x.astype(*args, **kwargs))(self)


def _pow(self, exponent):
    return sparsify(lambda x: jnp.power(x, exponent))(self)


_BCOO_METHODS = {
    "sum": _sum, "astype": _astype, "__pow__": _pow,
    "__abs__": sparsify(jnp.abs), "__neg__": sparsify(jnp.negative),
    "__pos__": sparsify(jnp.positive),
    "__matmul__": sparsify(jnp.matmul), "__rmatmul__": sparsify(_swap(jnp.matmul)),
    "__mul__": sparsify(jnp.multiply), "__rmul__": sparsify(_swap(jnp.multiply)),
    "__truediv__": sparsify(jnp.divide), "__rtruediv__": sparsify(_swap(jnp.divide)),
    "__add__": sparsify(jnp.add), "__radd__": sparsify(_swap(jnp.add)),
    "__sub__": sparsify(jnp.subtract), "__rsub__": sparsify(_swap(jnp.subtract)),
    "__rpow__": sparsify(_swap(jnp.power)),
    "__gt__": sparsify(jnp.greater), "__ge__": sparsify(jnp.greater_equal),
    "__lt__": sparsify(jnp.less), "__le__": sparsify(jnp.less_equal),
    "__eq__": sparsify(jnp.equal), "__ne__": sparsify(jnp.not_equal),
}
for _name, _method in _BCOO_METHODS.items():
    setattr(BCOO, _name, _method)
