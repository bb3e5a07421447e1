"""``VJPHiPrimitive``: JAX's class form of a library-defined primitive.

One instance is one operation with fixed parameters: its ``__init__`` sets ``in_avals`` (a
pytree of types), ``out_aval`` (a pytree) and ``params`` (a dict of hashable values, also
readable as attributes), and calling the instance applies it. Its methods are its rules:

- ``expand(*args)``: the operation in plax array operations (evaluation and lowering);
- ``jvp(primals, tangents)``; ``lin(nonzeros, *args) -> (out, residuals)`` with
  ``linearized(residuals, *tangents)`` (linear in the tangents); ``vjp_fwd(nonzeros,
  *args) -> (out, residuals[, out nonzeros])`` with ``vjp_bwd_retval(residuals, out_ct)``
  (input cotangents, returned) or ``vjp_bwd(residuals, out_ct, *accums)`` (added into
  ``GradAccum``s);
- ``transpose(out_ct, *args_or_accums)`` for an operation linear in some inputs;
- ``batch(axis_data, args, dims) -> (out, out_dims)``, or ``batch_dim_rule(axis_data,
  dims) -> out_dims``, which then maps ``expand`` with vmap (``VmapOf``).

How plax runs it: an operation on arrays only binds ``call_hi_primitive`` (an equation
holding the instance), whose rules call the methods above. Under forward differentiation
its ``jvp`` runs; while linearizing (grad, vjp) its ``lin``/``linearized`` if it has them,
else its ``vjp_fwd``, with a ``custom_lin`` equation whose transpose calls the backward rule
(as custom_vjp's). An operation with a hi type among its inputs or outputs is expanded when
called, as plax expands its other hi primitives (``plax.experimental.hijax``): its
derivatives and batching are those of ``expand``.
"""
from __future__ import annotations

from plax import tree_util
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, UndefinedPrimal, abstract_eval_rules, batch_rules,
                             effect_rules, impl_rules, jvp_rules, register_lowering,
                             tangent_aval, transpose_rules)
from plax.core.trace import current_trace, get_aval
from plax.first_order.ad_util import add_tangents, instantiate
from plax.first_order.batch_util import batched_aval
from plax.higher_order.custom_derivatives import jvp_by_fwd
from plax.lowering.inline import lower_fun

__all__ = ["VJPHiPrimitive", "VmapOf", "GradAccum", "NullAccum", "call_hi_primitive_p"]


class GradAccum:
    """Collects the cotangent of one input of a backward or transpose rule: ``accum(ct)``
    adds ``ct`` (None and symbolic zeros add nothing)."""

    def __init__(self, aval):
        self.aval = aval
        self.value = Zero(_ct_aval(aval))

    def accum(self, ct):
        if ct is not None and type(ct) is not Zero:
            self.value = add_tangents(self.value, ct)

    def __repr__(self):
        return f"GradAccum({self.aval.str_short()})"


class NullAccum(GradAccum):
    """The accumulator of an input that needs no cotangent: what it is given is dropped."""

    def accum(self, ct):
        pass


def _ct_aval(aval):
    to_ct = getattr(aval, "to_ct_aval", None)
    if to_ct is not None and not isinstance(aval, ShapedArray):
        return to_ct()
    return tangent_aval(aval)


def _is_high(aval) -> bool:
    return bool(getattr(aval, "is_high", False))


class VJPHiPrimitive:
    """A primitive defined by a class: see the module docstring."""

    effects: frozenset = frozenset()

    def __init__(self):
        for name in ("in_avals", "out_aval", "params"):
            if not hasattr(self, name):
                raise AttributeError(f"subclass __init__ should set `self.{name}`")
        cls = type(self)
        if (cls.vjp_bwd is not VJPHiPrimitive.vjp_bwd
                and cls.vjp_bwd_retval is not VJPHiPrimitive.vjp_bwd_retval):
            raise AttributeError(f"subclass {cls} should not override both "
                                 "`vjp_bwd` and `vjp_bwd_retval`")
        self.in_avals_flat, self.in_tree = tree_util.tree_flatten(self.in_avals)
        self.out_avals_flat, self.out_tree = tree_util.tree_flatten(self.out_aval)
        self.__dict__.update(self.params)
        self.check(*self.in_avals)

    # --- the rules a subclass defines ---------------------------------------------------
    def expand(self, *args):
        raise NotImplementedError(f"subclass {type(self)} must implement `expand`")

    def vjp_fwd(self, nzs_in, /, *args):
        raise NotImplementedError(f"for grad support, subclass {type(self)} must "
                                  "implement `vjp_fwd`")

    def vjp_bwd(self, res, outgrad, /, *arg_accums):
        grads = self.vjp_bwd_retval(res, outgrad)
        tree_util.tree_map(lambda acc, g: acc.accum(g) if isinstance(acc, GradAccum) else None,
                           arg_accums, tuple(grads), is_leaf=lambda x: x is None)

    def vjp_bwd_retval(self, res, outgrad, /):
        raise NotImplementedError(f"for grad support, subclass {type(self)} must "
                                  "implement `vjp_bwd` or `vjp_bwd_retval`")

    def jvp(self, primals, tangents):
        raise NotImplementedError(f"for jvp support, subclass {type(self)} must "
                                  "implement `jvp`")

    def lin(self, nzs_in, *primals):
        raise NotImplementedError(f"for linearize support, subclass {type(self)} "
                                  "must implement `lin` and `linearized`")

    def linearized(self, residuals, *tangents):
        raise NotImplementedError(f"for linearize support, subclass {type(self)} "
                                  "must implement `lin` and `linearized`")

    def transpose(self, out_ct, *maybe_accums):
        raise NotImplementedError(f"for transpose support, subclass {type(self)} "
                                  "must implement `transpose`")

    def batch(self, axis_data, args, dims):
        out_dim = self.batch_dim_rule(axis_data, dims)
        return VmapOf(self, axis_data, dims, out_dim)(*args), out_dim

    def batch_dim_rule(self, axis_data, dims, /):
        raise NotImplementedError(f"for vmap support, subclass {type(self)} must "
                                  "implement `batch` or `batch_dim_rule`")

    def check(self, *arg_tys):
        """Checks of the argument types a subclass may add (raise to refuse them)."""

    # --- applying it ----------------------------------------------------------------------
    def __call__(self, *args):
        leaves = _leaves_checked(self.in_tree, args, self)
        if any(map(_is_high, self.in_avals_flat)) or any(map(_is_high, self.out_avals_flat)):
            return self.expand(*args)  # hi values are Python objects while plax traces
        outs = call_hi_primitive_p.bind(*leaves, _prim=self)
        return tree_util.tree_unflatten(self.out_tree, outs)

    def __repr__(self):
        return f"{type(self).__name__}[{self.params}]"

    def __hash__(self):
        return hash((type(self).__name__, tuple(self.params.items()), self.effects))

    def __eq__(self, other):
        return (type(self) is type(other) and self.params == other.params
                and self.effects == other.effects)


def _leaves_checked(tree, values, prim):
    leaves, got = tree_util.tree_flatten(values)
    if got != tree:
        raise TypeError(f"{prim} takes arguments of structure {tree}, got {got}")
    return leaves


class VmapOf(VJPHiPrimitive):
    """``prim`` mapped over one axis (the default ``batch`` of a primitive that gives its
    output batch dimensions with ``batch_dim_rule``): ``expand`` is vmap of ``prim``'s."""

    def __init__(self, prim, axis_data, in_dims, out_dim):
        size = axis_data.size
        self.in_avals = tree_util.tree_map(lambda a, d: batched_aval(a, d, size),
                                           prim.in_avals, in_dims)
        self.out_aval = tree_util.tree_map(lambda a, d: batched_aval(a, d, size),
                                           prim.out_aval, out_dim)
        self.params = dict(prim=prim, axis_data=axis_data, in_dims=in_dims, out_dim=out_dim)
        super().__init__()

    def _vmap(self, fun, in_axes, out_axes):
        from plax.api.vmap import vmap
        return vmap(fun, in_axes=in_axes, out_axes=out_axes, axis_size=self.axis_data.size,
                    axis_name=self.axis_data.name, spmd_axis_name=self.axis_data.spmd_name)

    def expand(self, *args):
        return self._vmap(self.prim.expand, tuple(self.in_dims), self.out_dim)(*args)

    def jvp(self, primals, tangents):
        return self._vmap(self.prim.jvp, (tuple(self.in_dims),) * 2,
                          (self.out_dim, self.out_dim))(primals, tangents)

    def batch_dim_rule(self, axis_data, in_dims):
        def inner(d, d_):  # the dimension in the per-example value of the inner mapping
            return d if d is None or d_ is None else d - (d_ < d)
        dims = tree_util.tree_map(inner, tuple(in_dims), tuple(self.in_dims),
                                  is_leaf=lambda x: x is None)
        out = self.prim.batch_dim_rule(axis_data, dims)
        return tree_util.tree_map(lambda d, d_: d + (d_ < d), out, self.out_dim)

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other


# --- the primitive ---------------------------------------------------------------------------
call_hi_primitive_p = Primitive("call_hi_primitive", multiple_results=True)


def _expand_flat(*args, _prim):
    out = _prim.expand(*tree_util.tree_unflatten(_prim.in_tree, list(args)))
    return _leaves_checked(_prim.out_tree, out, _prim)


def _abstract_eval(*avals, _prim):
    return list(_prim.out_avals_flat)


def _linearizing() -> bool:
    """Whether a jvp rule runs for linearize (grad, vjp): a JVP trace under partial
    evaluation (the rule runs in that trace's parent)."""
    return bool(getattr(current_trace(), "partial_eval", False))


def _overrides(prim, name) -> bool:
    return getattr(type(prim), name) is not getattr(VJPHiPrimitive, name)


def _jvp(primals, tangents, *, _prim):
    prefer_lin = _linearizing() or not _overrides(_prim, "jvp")
    if prefer_lin and _overrides(_prim, "lin"):
        return _jvp_by_lin(_prim, primals, tangents)
    if prefer_lin and _overrides(_prim, "vjp_fwd"):
        return jvp_by_fwd(_fwd_rule(_prim), primals, tangents)
    unflat = tree_util.tree_unflatten
    outs, tans = _prim.jvp(unflat(_prim.in_tree, list(primals)),
                           unflat(_prim.in_tree, list(tangents)))
    outs = _leaves_checked(_prim.out_tree, outs, _prim)
    tans = tree_util.broadcast_prefix(tans, unflat(_prim.out_tree, outs),
                                      is_leaf=lambda x: x is None or type(x) is Zero)
    tans = [Zero(tangent_aval(get_aval(o))) if t is None else t for o, t in zip(outs, tans)]
    return outs, tans


def _jvp_by_lin(prim, primals, tangents):
    """Outputs and their tangents from ``lin`` (outputs, residuals) and ``linearized``
    (residuals, input tangents -> output tangents)."""
    unflat = tree_util.tree_unflatten
    nzs = unflat(prim.in_tree, [type(t) is not Zero for t in tangents])
    got = prim.lin(nzs, *unflat(prim.in_tree, list(primals)))
    outs = _leaves_checked(prim.out_tree, got[0], prim)
    tans = prim.linearized(got[1], *unflat(prim.in_tree, [instantiate(t) for t in tangents]))
    return outs, _leaves_checked(prim.out_tree, tans, prim)


def _fwd_rule(prim):
    """``prim``'s vjp_fwd and backward rule as the flat ``fwd`` custom_vjp's jvp runs."""
    def fwd(primals, nonzero):
        nzs = tree_util.tree_unflatten(prim.in_tree, list(nonzero))
        got = prim.vjp_fwd(nzs, *tree_util.tree_unflatten(prim.in_tree, list(primals)))
        out, res = got[0], got[1]
        outs = _leaves_checked(prim.out_tree, out, prim)
        res_leaves, res_tree = tree_util.tree_flatten(res)

        def bwd(res_vals, cts):
            residuals = tree_util.tree_unflatten(res_tree, list(res_vals))
            g = tree_util.tree_unflatten(prim.out_tree, list(cts))
            accums = [GradAccum(a) if nz else NullAccum(a)
                      for a, nz in zip(prim.in_avals_flat, nonzero)]
            if prim.vjp_bwd(residuals, g, *tree_util.tree_unflatten(prim.in_tree, accums)) \
                    is not None:
                raise TypeError(f"{prim}.vjp_bwd must add into its accumulators and return None")
            return [_checked_ct(acc) for acc in accums]
        return outs, res_leaves, bwd
    return fwd


def _checked_ct(acc):
    """An accumulated cotangent, of the input's cotangent dtype."""
    ct = acc.value
    if type(ct) is Zero or not isinstance(acc.aval, ShapedArray):
        return ct
    want = _ct_aval(acc.aval)
    return Zero(want) if want.dtype == dtypes.float0 else ct


def _transpose(cts, *args, _prim):
    accums = [GradAccum(a.aval) if type(a) is UndefinedPrimal else a for a in args]
    out = _prim.transpose(tree_util.tree_unflatten(_prim.out_tree, list(cts)),
                          *tree_util.tree_unflatten(_prim.in_tree, accums))
    if out is not None:
        raise TypeError(f"{_prim}.transpose must add into its accumulators and return None")
    return [_checked_ct(a) if isinstance(a, GradAccum) else None for a in accums]


def _batch(axis, vals, dims, *, _prim):
    args = tree_util.tree_unflatten(_prim.in_tree, list(vals))
    in_dims = tree_util.tree_unflatten(_prim.in_tree, list(dims))
    out, out_dims = _prim.batch(axis, args, in_dims)
    outs = _leaves_checked(_prim.out_tree, out, _prim)
    out_dims = tree_util.broadcast_prefix(out_dims, tree_util.tree_unflatten(_prim.out_tree, outs),
                                          is_leaf=lambda x: x is None)
    return outs, out_dims


abstract_eval_rules[call_hi_primitive_p] = _abstract_eval
impl_rules[call_hi_primitive_p] = _expand_flat
register_lowering(call_hi_primitive_p, lower_fun(_expand_flat, multiple_results=True))
jvp_rules[call_hi_primitive_p] = _jvp
transpose_rules[call_hi_primitive_p] = _transpose
batch_rules[call_hi_primitive_p] = _batch
effect_rules[call_hi_primitive_p] = lambda params: frozenset(params["_prim"].effects)
