"""The sparse rules ``sparsify`` applies to BCOO operands (``transform.sparse_rules_bcoo``),
and the BCOO operators and methods made with ``sparsify``.

A rule takes the ``SparsifyEnv`` and the operands' ``SparsifyValue`` records (and the
primitive's parameters) and returns the output records. Elementwise rules reuse the operand's
``indices_ref`` (the result has its sparsity pattern); the others call the BCOO functions.
Control flow (``while``, ``cond``, ``scan``) runs the sparse interpreter inside the bodies,
carrying each sparse value as its data and indices buffers; a custom_jvp function stays one
(on the buffers), its rule evaluated sparsely.
"""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.core.trace import get_aval
from plax.experimental.sparse.api import todense_p
from plax.experimental.sparse.bcoo import (BCOO, bcoo_dot_general, bcoo_multiply_sparse,
                                           bcoo_reduce_sum, bcoo_sum_duplicates, bcoo_transpose,
                                           multiply_dense_bufs)
from plax.experimental.sparse.bcoo_index import bcoo_conv_general_dilated, bcoo_gather
from plax.experimental.sparse.bcoo_shape import (bcoo_broadcast_in_dim, bcoo_concatenate,
                                                 bcoo_dynamic_slice, bcoo_reshape, bcoo_rev,
                                                 bcoo_slice, bcoo_squeeze)
from plax.experimental.sparse.transform import (SparsifyEnv, arrays_to_spvalues, eval_sparse,
                                                sparse_rules_bcoo, sparsify, spvalues_to_arrays)
from plax.first_order.utility import stack_p
from plax.higher_order.custom_derivatives import custom_jvp_call_p
from plax.higher_order.pjit import pjit_p

__all__ = []


def _arrays(spenv, *spvalues):
    return spvalues_to_arrays(spenv, list(spvalues))


def _values(spenv, *arrays):
    return arrays_to_spvalues(spenv, list(arrays))


def _same_pattern(spenv, v, data, *, unique=None):
    """A value with ``v``'s indices holding ``data``."""
    return spenv.sparse(v.shape, data, indices_ref=v.indices_ref, indices_sorted=v.indices_sorted,
                        unique_indices=v.unique_indices if unique is None else unique)


def _unique(spenv, v):
    """``v`` with repeated indices merged, so that a nonlinear map of its data is right."""
    if v.unique_indices:
        return v
    arr, = _arrays(spenv, v)
    return _values(spenv, bcoo_sum_duplicates(arr, nse=arr.nse))[0]


# --- elementwise --------------------------------------------------------------------------------
def _zero_preserving_unary(prim, linear: bool):
    def rule(spenv, v, **params):
        if not linear:
            v = _unique(spenv, v)
        return [_same_pattern(spenv, v, prim.bind(spenv.data(v), **params))]
    return rule


# Unary primitives mapping zero to zero, so applied to the stored data alone (BCSR's rules
# use these too): the linear ones also where indices repeat, the others once merged.
LINEAR_UNARY = (lax.conj_p, lax.copy_p, lax.imag_p, lax.neg_p, lax.real_p)
NONLINEAR_UNARY = (lax.abs_p, lax.asin_p, lax.asinh_p, lax.atan_p, lax.atanh_p, lax.bessel_i1e_p,
                   lax.expm1_p, lax.log1p_p, lax.sign_p, lax.sin_p, lax.sinh_p, lax.sqrt_p,
                   lax.square_p, lax.tan_p, lax.tanh_p, lax.convert_element_type_p)
for _p in LINEAR_UNARY:
    sparse_rules_bcoo[_p] = _zero_preserving_unary(_p, linear=True)
for _p in NONLINEAR_UNARY:
    sparse_rules_bcoo[_p] = _zero_preserving_unary(_p, linear=False)


def check_integer_pow(y: int):
    """``integer_pow`` keeps a sparse array sparse only for a positive exponent."""
    if y <= 0:
        raise NotImplementedError(
            f"sparse rule for {lax.integer_pow_p} with non-positive exponent {y} is not "
            "implemented because it would result in dense output. If this is your intent, use "
            "sparse.todense() to convert your argument to a dense array.")


def _integer_pow(spenv, v, *, y):
    check_integer_pow(y)
    v = _unique(spenv, v)
    return [_same_pattern(spenv, v, lax.integer_pow_p.bind(spenv.data(v), y=y))]


def _common_batch(bufs, n_batch):
    """Buffers broadcast to common batch sizes (so that they can be concatenated)."""
    sizes = [max(get_aval(b).shape[k] for b in bufs) for k in range(n_batch)]
    return [jnp.broadcast_to(b, tuple(sizes) + get_aval(b).shape[n_batch:]) for b in bufs]


def _add(spenv, x, y, **params):
    if x.is_sparse() and y.is_sparse():
        if x.shape != y.shape:
            raise NotImplementedError("Addition between sparse matrices of different shapes.")
        if x.indices_ref == y.indices_ref:
            return [_same_pattern(spenv, x, lax.add(spenv.data(x), spenv.data(y)))]
        xd, xi, yd, yi = (spenv.data(x), spenv.indices(x), spenv.data(y), spenv.indices(y))
        if get_aval(xi).ndim != get_aval(yi).ndim or get_aval(xd).ndim != get_aval(yd).ndim:
            raise NotImplementedError("Addition between sparse matrices with different "
                                      "batch/dense dimensions.")
        n_batch = get_aval(xi).ndim - 2
        xd, yd, xi, yi = _common_batch([xd, yd, xi, yi], n_batch)
        dtype = jnp.result_type(xi.dtype, yi.dtype)
        return [spenv.sparse(x.shape, lax.concatenate([xd, yd], n_batch),
                             lax.concatenate([xi.astype(dtype), yi.astype(dtype)], n_batch))]
    sp, dense = (x, y) if x.is_sparse() else (y, x)
    out_shape = tuple(jnp.broadcast_shapes(x.shape, y.shape))
    if dense.shape != out_shape:
        raise NotImplementedError(
            "Addition between a sparse array X and a dense array Y is not implemented when the "
            "output shape is larger than Y.shape. This is to prevent silent densification of a "
            "large sparse array. If this is your intent, you can explicitly cast the sparse "
            "array to a dense matrix.")
    arr, = _arrays(spenv, sp)
    return [spenv.dense(arr.todense() + spenv.data(dense))]


def _sub(spenv, x, y, **params):
    if x.is_sparse() and y.is_sparse():
        return _add(spenv, x, _same_pattern(spenv, y, lax.neg(spenv.data(y))))
    raise NotImplementedError("Subtraction between sparse and dense array.")


def _mul(spenv, x, y, **params):
    if x.is_sparse() and y.is_sparse():
        if x.indices_ref == y.indices_ref and x.unique_indices:
            return [_same_pattern(spenv, x, lax.mul(spenv.data(x), spenv.data(y)))]
        return _values(spenv, bcoo_multiply_sparse(*_arrays(spenv, x, y)))
    sp, dense = (x, y) if x.is_sparse() else (y, x)
    arr, = _arrays(spenv, sp)
    data = multiply_dense_bufs(arr.data, arr.indices, spenv.data(dense), spinfo=arr._info)
    return [_same_pattern(spenv, sp, data)]


def _div(spenv, x, y, **params):
    if y.is_sparse():
        raise NotImplementedError(
            "Division by a sparse array is not implemented because it would result in dense "
            "output. If this is your intent, use sparse.todense() to convert your arguments to "
            "a dense array.")
    arr, = _arrays(spenv, x)
    den = spenv.data(y)
    one = jnp.ones((), get_aval(den).dtype)
    data = multiply_dense_bufs(arr.data, arr.indices, lax.div(one, den), spinfo=arr._info)
    return [_same_pattern(spenv, x, data)]


# --- products, reductions, layout --------------------------------------------------------------
def _dot_general(spenv, x, y, *, dimension_numbers, precision=None, preferred_element_type=None,
                 **params):
    out = bcoo_dot_general(*_arrays(spenv, x, y), dimension_numbers=dimension_numbers,
                           preferred_element_type=preferred_element_type)
    return _values(spenv, out)


def _reduce_sum(spenv, x, *, axes, **params):
    out = bcoo_reduce_sum(*_arrays(spenv, x), axes=axes)
    if out.shape == ():
        return [spenv.dense(jnp.sum(out.data, dtype=out.dtype))]
    return _values(spenv, out)


def _standard(fun):
    """A rule calling ``fun(*arrays, **params)`` (a BCOO function returning one array)."""
    def rule(spenv, *spvalues, **params):
        return _values(spenv, fun(*_arrays(spenv, *spvalues), **params))
    return rule


def _concatenate(*operands, dimension):
    return bcoo_concatenate(operands, dimension=dimension)


def _dynamic_slice(operand, *starts, slice_sizes):
    return bcoo_dynamic_slice(operand, starts, slice_sizes)


def _conv(lhs, rhs, **params):
    params.pop("out_sharding", None)
    return bcoo_conv_general_dilated(lhs, rhs, **params)


def _stack(spenv, *spvalues, axis):
    expanded = []
    for mat in _arrays(spenv, *spvalues):
        if not isinstance(mat, BCOO):
            raise NotImplementedError("sparse rule for stack with dense operands is not "
                                      "implemented; convert them with BCOO.fromdense.")
        shape = mat.shape[:axis] + (1,) + mat.shape[axis:]
        dims = tuple(d if d < axis else d + 1 for d in range(mat.ndim))
        expanded.append(bcoo_broadcast_in_dim(mat, shape=shape, broadcast_dimensions=dims))
    return _values(spenv, bcoo_concatenate(expanded, dimension=axis))


def _todense(spenv, *spvalues, tree):
    return [spenv.dense(_arrays(spenv, spvalues[0])[0].todense())]


sparse_rules_bcoo.update({
    lax.integer_pow_p: _integer_pow,
    lax.add_p: _add, lax.sub_p: _sub, lax.mul_p: _mul, lax.div_p: _div,
    lax.dot_general_p: _dot_general, lax.reduce_sum_p: _reduce_sum,
    lax.transpose_p: _standard(lambda x, *, permutation: bcoo_transpose(
        x, permutation=permutation)),
    lax.broadcast_in_dim_p: _standard(bcoo_broadcast_in_dim),
    lax.concatenate_p: _standard(_concatenate),
    lax.conv_general_dilated_p: _standard(_conv),
    lax.dynamic_slice_p: _standard(_dynamic_slice),
    lax.gather_p: _standard(bcoo_gather),
    lax.reshape_p: _standard(bcoo_reshape),
    lax.rev_p: _standard(bcoo_rev),
    lax.slice_p: _standard(bcoo_slice),
    lax.squeeze_p: _standard(bcoo_squeeze),
    stack_p: _stack, todense_p: _todense,
})


# --- calls and control flow ---------------------------------------------------------------------
def _pjit(spenv, *spvalues, jaxpr, **params):
    """A jit-compiled inner function: its body evaluated in place (sparse values flow
    through it; the enclosing computation decides about compilation)."""
    return eval_sparse(jaxpr.jaxpr, jaxpr.consts, list(spvalues), spenv)


def _custom_jvp(spenv, *spvalues, call_jaxpr, jvp, num_consts=0, symbolic_zeros=False,
                name="", **params):
    """A custom_jvp function on sparse values: still a custom_jvp call, on the buffers. Its
    primal is the body evaluated sparsely; its rule is the function's own JVP rule evaluated
    sparsely with each tangent sharing its primal's indices, so a rule that keeps sparsity
    patterns (an elementwise one) differentiates as written."""
    if not any(v.is_sparse() for v in spvalues):
        return eval_sparse(call_jaxpr.jaxpr, call_jaxpr.consts, list(spvalues), spenv)
    bufs, kinds = _flatten(spenv, spvalues)
    flags = _flags(spvalues)
    records = []

    def fun(*in_bufs):
        inner = SparsifyEnv()
        ins = _unflatten(inner, in_bufs, kinds, flags=flags)
        outs = eval_sparse(call_jaxpr.jaxpr, call_jaxpr.consts, ins, inner)
        records.append(_pattern_sources(inner, ins, outs))
        return _flatten(inner, outs)[0]

    def rule(primals, tangents):  # (under differentiation it runs instead of fun)
        return _custom_jvp_rule(primals, tangents, kinds, flags, jvp, num_consts, name,
                                records)
    outs = custom_jvp_call_p.bind(*bufs, fun=fun, jvp=rule, symbolic_zeros=False, name=name)
    # Outputs keeping an input's indices share its pattern (so later rules can match them).
    values, it = [], iter(outs)
    for shape, source, flags in records[-1]:
        if shape is None:
            values.append(spenv.dense(next(it)))
            continue
        data, indices = next(it), next(it)
        if source is None:
            values.append(spenv.sparse(shape, data, indices, indices_sorted=flags[0],
                                       unique_indices=flags[1]))
        else:
            values.append(spenv.sparse(shape, data, indices_ref=spvalues[source].indices_ref,
                                       indices_sorted=flags[0], unique_indices=flags[1]))
    return values


def _pattern_sources(env, ins, outs):
    """Per output value: ``(shape or None for dense, the input whose indices it keeps or
    None, (indices_sorted, unique_indices))``."""
    out = []
    for v in outs:
        if v.is_dense():
            out.append((None, None, None))
            continue
        source = next((j for j, w in enumerate(ins) if w.is_sparse()
                       and w.indices_ref == v.indices_ref), None)
        out.append((v.shape, source, (v.indices_sorted, v.unique_indices)))
    return out


def _custom_jvp_rule(primals, tangents, kinds, flags, jvp, num_consts, name, records):
    """The JVP of a sparsified custom_jvp call on buffers: the function's rule evaluated
    sparsely, each tangent sharing its primal's indices."""
    from plax.core.avals import ShapedArray
    from plax.core.rules import Zero, tangent_aval
    from plax.core.staging import trace_to_jaxpr
    inner = SparsifyEnv()
    p_vals = _unflatten(inner, primals, kinds, flags=flags)
    t_vals, it = [], iter(tangents)
    for v, kind in zip(p_vals, kinds):
        t = next(it)
        data = inner.data(v)
        if type(t) is Zero:
            t = jnp.zeros(get_aval(data).shape, get_aval(data).dtype)
        if kind is None:
            t_vals.append(inner.dense(t))
        else:
            next(it)  # the indices have no tangent
            t_vals.append(inner.sparse(v.shape, t, indices_ref=v.indices_ref,
                                       indices_sorted=v.indices_sorted,
                                       unique_indices=v.unique_indices))
    n = len(p_vals)

    def dense_rule(*args):  # the function's own rule, on dense types
        outs, tans = jvp(list(args[num_consts:n]), list(args[n + num_consts:]))
        tans = [jnp.zeros(get_aval(o).shape, get_aval(o).dtype) if type(t) is Zero else t
                for o, t in zip(outs, tans)]
        return list(outs) + tans
    avals = [ShapedArray(v.shape, get_aval(inner.data(v)).dtype) for v in p_vals + t_vals]
    jaxpr, consts = trace_to_jaxpr(dense_rule, avals, description=f"custom_jvp rule of {name}")
    outs = eval_sparse(jaxpr, consts, p_vals + t_vals, inner)
    m = len(outs) // 2
    p_out, t_out = outs[:m], outs[m:]
    records.append(_pattern_sources(inner, p_vals, p_out))
    flat, tans = [], []
    for p, t in zip(p_out, t_out):
        if p.is_sparse():
            if t.indices_ref != p.indices_ref:
                raise NotImplementedError(
                    f"sparsify: the custom_jvp rule of {name} gives a tangent whose sparsity "
                    "pattern differs from its output's, which a derivative of the output's "
                    "data cannot express; densify its argument with sparse.todense().")
            flat += [inner.data(p), inner.indices(p)]
            tans += [inner.data(t), Zero(tangent_aval(get_aval(inner.indices(p))))]
        else:
            flat.append(inner.data(p))
            tans.append(inner.data(t) if not t.is_sparse() else
                        spvalues_to_arrays(inner, [t])[0].todense())
    return flat, tans


def _flatten(spenv, spvalues):
    """``(buffers, kinds)``: the values' buffers in order (data then indices for BCOO) and
    what they were (``None`` for dense, the shape for BCOO)."""
    bufs, kinds = [], []
    for v in spvalues:
        if v.is_bcsr():
            raise NotImplementedError("sparsify: control flow with BCSR values is not "
                                      "supported; convert them to BCOO.")
        if v.is_sparse():
            bufs += [spenv.data(v), spenv.indices(v)]
            kinds.append(v.shape)
        else:
            bufs.append(spenv.data(v))
            kinds.append(None)
    return bufs, tuple(kinds)


def _unflatten(spenv, bufs, kinds, lead=(), flags=None):
    """Values of ``spenv`` for buffers ``_flatten`` gave; ``flags`` (per value, what is
    known of its indices: ``(sorted, unique)``) default to nothing known."""
    out, it = [], iter(bufs)
    for shape, known in zip(kinds, flags or [None] * len(kinds)):
        if shape is None:
            out.append(spenv.dense(next(it)))
        else:
            sort, unique = known or (False, False)
            out.append(spenv.sparse(tuple(lead) + tuple(shape), next(it), next(it),
                                    indices_sorted=sort, unique_indices=unique))
    return out


def _flags(spvalues):
    return tuple((v.indices_sorted, v.unique_indices) if v.is_sparse() else None
                 for v in spvalues)


def _run_body(spenv, closed, consts, bufs, kinds):
    """Evaluate ``closed`` on ``consts`` (values of ``spenv``) and the values ``bufs`` and
    ``kinds`` describe, in an environment extending ``spenv``; ``(env, output values)``."""
    inner = SparsifyEnv(spenv._buffers)
    values = list(consts) + _unflatten(inner, bufs, kinds)
    return inner, eval_sparse(closed.jaxpr, closed.consts, values, inner)


def _mismatch(what, before, after):
    return TypeError(f"sparsify: {what} must keep the sparsity structure of its carry, got "
                     f"{_describe(before)} in and {_describe(after)} out.")


def _describe(kinds):
    return "(" + ", ".join("dense" if k is None else f"BCOO{list(k)}" for k in kinds) + ")"


def _while(spenv, *spvalues, cond_jaxpr, cond_nconsts, body_jaxpr, body_nconsts, **params):
    cond_consts = spvalues[:cond_nconsts]
    body_consts = spvalues[cond_nconsts:cond_nconsts + body_nconsts]
    init, kinds = _flatten(spenv, spvalues[cond_nconsts + body_nconsts:])

    def cond_fun(carry):
        inner, (pred,) = _run_body(spenv, cond_jaxpr, cond_consts, carry, kinds)
        if pred.is_sparse():
            raise NotImplementedError("sparsify: a while_loop condition must be dense.")
        return inner.data(pred)

    def body_fun(carry):
        inner, outs = _run_body(spenv, body_jaxpr, body_consts, carry, kinds)
        bufs, out_kinds = _flatten(inner, outs)
        if out_kinds != kinds:
            raise _mismatch("while_loop body_fun", kinds, out_kinds)
        return bufs
    return _unflatten(spenv, lax.while_loop(cond_fun, body_fun, init), kinds)


def _cond(spenv, index, *operands, branches, **params):
    if index.is_sparse():
        raise NotImplementedError("sparsify: the predicate of cond must be dense.")
    bufs, kinds = _flatten(spenv, operands)
    out_kinds = []

    def branch(closed):
        def run(*args):
            inner, outs = _run_body(spenv, closed, (), list(args), kinds)
            flat, k = _flatten(inner, outs)
            out_kinds.append(k)
            return flat
        return run
    from plax.api.jit import eval_shape
    runs = [branch(b) for b in branches]
    for run in runs:  # the branches' output structures, compared before lax.switch sees them
        eval_shape(run, *bufs)
    if any(k != out_kinds[0] for k in out_kinds):
        raise TypeError("sparsified true_fun output must have same type structure as "
                        "sparsified false_fun output, but they differ: "
                        f"{_describe(out_kinds[-1])} and {_describe(out_kinds[0])}.")
    out = lax.switch(spenv.data(index), runs, *bufs)
    return _unflatten(spenv, out, out_kinds[0])


def _scan(spenv, *spvalues, jaxpr, num_consts, num_carry, length, reverse=False, unroll=1,
          **params):
    consts = spvalues[:num_consts]
    carry, carry_kinds = _flatten(spenv, spvalues[num_consts:num_consts + num_carry])
    xs_values = spvalues[num_consts + num_carry:]
    if any(v.is_sparse() for v in xs_values):
        raise NotImplementedError("sparse rule for scan with x values.")
    xs = [spenv.data(v) for v in xs_values]
    ys_kinds = []

    def body(c, x):
        inner = SparsifyEnv(spenv._buffers)
        values = list(consts) + _unflatten(inner, c, carry_kinds) + [inner.dense(a) for a in x]
        outs = eval_sparse(jaxpr.jaxpr, jaxpr.consts, values, inner)
        c_out, k = _flatten(inner, outs[:num_carry])
        if k != carry_kinds:
            raise _mismatch("scan body", carry_kinds, k)
        ys, yk = _flatten(inner, outs[num_carry:])
        ys_kinds.append(yk)
        return c_out, ys
    c_out, ys = lax.scan(body, carry, xs, length=length, reverse=reverse, unroll=unroll)
    # A sparse per-step output stacks into a BCOO array with one more batch dimension.
    return (_unflatten(spenv, c_out, carry_kinds)
            + _unflatten(spenv, ys, ys_kinds[0], lead=(length,)))


sparse_rules_bcoo.update({
    pjit_p: _pjit, custom_jvp_call_p: _custom_jvp,
    lax.while_p: _while, lax.cond_p: _cond, lax.scan_p: _scan,
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


def _reshape(self, *args, **kwargs):
    """The array with a new shape (as ``jnp.reshape``; batch and dense dimensions reshape
    only among themselves)."""
    return sparsify(lambda x: x.reshape(*args, **kwargs))(self)


def _pow(self, exponent):
    return sparsify(lambda x: jnp.power(x, exponent))(self)


def _getitem(arr, idx, indices_are_sorted=False, unique_indices=False, mode=None,
             fill_value=None):
    """NumPy-style indexing (integers, slices, None, Ellipsis, integer arrays); the result
    is a BCOO array."""
    def take(x):
        return x.at[idx].get(indices_are_sorted=indices_are_sorted,
                             unique_indices=unique_indices, mode=mode, fill_value=fill_value)
    out = sparsify(take)(arr)
    if not isinstance(out, BCOO):
        out = BCOO.fromdense(out, nse=max(1, out.size))
    return out


def _iter(arr):
    return iter(arr[i] for i in range(arr.shape[0]))


_BCOO_METHODS = {
    "sum": _sum, "astype": _astype, "reshape": _reshape, "__pow__": _pow,
    "__getitem__": _getitem, "__iter__": _iter,
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

