"""``plax.interpreters.ad``: forward and reverse differentiation rules, as ``jax.interpreters.ad``.

``primitive_jvps`` and ``primitive_transposes`` *are* plax's tables (``plax.core.rules``):
a rule written here is the rule plax's jvp, linearize, grad and vjp run. The calling
conventions are JAX's, which are plax's own:

- ``primitive_jvps[p] = rule(primals, tangents, **params) -> (primal_out, tangent_out)``;
  a tangent may be a symbolic ``Zero``;
- ``primitive_transposes[p] = rule(ct, *args, **params) -> [ct for each arg]``; the linear
  arguments are ``UndefinedPrimal``s, and a result may be ``None`` or a ``Zero``.
"""
from __future__ import annotations

from plax.core.rules import (UndefinedPrimal, Zero, is_undefined as is_undefined_primal,  # noqa: F401
                             jvp_rules as primitive_jvps, transpose_rules as primitive_transposes)
from plax.first_order import ad_util as _ad_util
from plax.first_order.ad_util import (add_tangents, defbilinear,  # noqa: F401
                                      instantiate as instantiate_zeros, zeros_like_aval)
from plax.core import dtypes
from plax.core.jaxpr import Jaxpr, Var
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, register_lowering, tangent_aval
from plax.core.trace import get_aval
from plax.core.tree_core import tree_flatten, tree_unflatten
from plax.first_order.batch_util import bdim_at_front
from plax.transforms.jvp import JVPTrace, JVPTracer, jvp_flat  # noqa: F401
from plax.transforms.linearize import linearize_flat


# --- add_jaxvals_p: the sum of two tangents (JAX's ``add_any``) ------------------------------
add_jaxvals_p = Primitive("add_any")


def _add_jaxvals_abstract(x, y):
    if x.shape != y.shape or x.dtype != y.dtype:
        raise TypeError(f"add_any (add_jaxvals_p) takes two values of one type, got "
                        f"{x.str_short()} and {y.str_short()}")
    return x.strip_weak_type() if x.weak_type != y.weak_type else x


def _add_jaxvals_lowering(ctx, x, y):
    if ctx.avals_out[0].dtype == dtypes.float0:
        return x  # float0 values carry nothing: either operand is the sum
    return ctx.op1("stablehlo.add", [x, y])


abstract_eval_rules[add_jaxvals_p] = _add_jaxvals_abstract
register_lowering(add_jaxvals_p, _add_jaxvals_lowering)
_ad_util.deflinear(add_jaxvals_p)
primitive_transposes[add_jaxvals_p] = lambda ct, x, y: [
    ct if is_undefined_primal(x) else None, ct if is_undefined_primal(y) else None]


def _add_jaxvals_batch(axis, vals, dims):
    (x, y), (dx, dy) = vals, dims
    if dx == dy:
        return add_jaxvals_p.bind(x, y), dx
    return add_jaxvals_p.bind(bdim_at_front(x, dx, axis.size),
                              bdim_at_front(y, dy, axis.size)), 0


batch_rules[add_jaxvals_p] = _add_jaxvals_batch


def add_jaxvals(x, y):
    """``x + y`` for two values of the same type (tangents, cotangents), as one
    ``add_jaxvals_p`` equation."""
    return add_jaxvals_p.bind(x, y)


# --- forward and linearized differentiation of a function (JAX's entry points) --------------
def _arguments(xs) -> tuple:
    """Positional arguments given as a tuple/list or as a FlatTree-like (``unflatten()``)."""
    if callable(getattr(xs, "unflatten", None)):
        xs = xs.unflatten()
    return tuple(xs)


def jvp(fun, primals, tangents, has_aux=False, instantiate=True, transform_stack=True):
    """``fun(*primals)`` differentiated forward along ``tangents`` (one per primal, pytrees
    alike; a symbolic ``Zero`` allowed). Returns ``(out_primals, out_tangents[, aux])``, the
    outputs flat; ``instantiate`` (a bool, or one per output) turns zero tangents into
    arrays."""
    del transform_stack
    primals, tangents = _arguments(primals), _arguments(tangents)
    flat_p, tree = tree_flatten(primals)
    flat_t, tree_t = tree_flatten(tangents, is_leaf=lambda t: type(t) is Zero)
    if tree != tree_t:
        raise TypeError(f"jvp: primals and tangents must have the same tree structure, got "
                        f"{tree} and {tree_t}")
    split = []  # (number of outputs, aux treedef): aux leaves leave as primals only

    def flat_fun(*xs):
        out = _call(fun, tree_unflatten(tree, xs))
        aux_leaves, aux_tree = [], None
        if has_aux:
            out, aux = out
            aux_leaves, aux_tree = tree_flatten(aux)
        outs, _ = tree_flatten(out)
        split.append((len(outs), aux_tree))
        return outs + aux_leaves

    out_p, out_t = jvp_flat(flat_fun, flat_p, flat_t, "jvp")
    n, aux_tree = split[0]
    out_p, aux_p, out_t = out_p[:n], out_p[n:], out_t[:n]
    inst = [instantiate] * len(out_t) if isinstance(instantiate, bool) else list(instantiate)
    out_t = [instantiate_zeros(t) if i else t for t, i in zip(out_t, inst)]
    if has_aux:
        return out_p, out_t, tree_unflatten(aux_tree, aux_p)
    return out_p, out_t


def _call(fun, args):
    return fun.call_wrapped(*args) if callable(getattr(fun, "call_wrapped", None)) \
        else fun(*args)


def linearize(traceable, primals, has_aux=False, is_vjp=False):
    """Linearize ``traceable(*primals)``: returns ``(out_primals, out_zeros, jaxpr, consts[,
    aux])``, the outputs flat. ``jaxpr`` maps one tangent per flat input to the non-zero
    output tangents (those whose ``out_zeros`` entry is False); its constvars take
    ``consts``, the residuals."""
    del is_vjp
    primals = _arguments(primals)
    flat_p, tree = tree_flatten(primals)
    split = []  # (outputs, aux treedef, aux leaves): aux leaves leave as primals only

    def flat_fun(*xs):
        out = _call(traceable, tree_unflatten(tree, xs))
        aux_leaves, aux_tree = [], None
        if has_aux:
            if not isinstance(out, (list, tuple)) or len(out) != 2:
                raise TypeError("expected function with aux output to return a two-element "
                                f"tuple, but got type {type(out)} with value {out!r}")
            out, aux = out
            aux_leaves, aux_tree = tree_flatten(aux)
        outs, _ = tree_flatten(out)
        split.append((len(outs), aux_tree, len(aux_leaves)))
        return outs + aux_leaves

    out_p, lin, has_out = linearize_flat(flat_fun, flat_p, "linearize",
                                         num_aux=lambda: split[0][2])
    # plax's linear jaxpr takes the tangents of inexact inputs only: give every input one.
    inexact = iter(lin.jaxpr.invars)
    invars = [next(inexact) if dtypes.is_inexact(get_aval(p).dtype) else
              Var(tangent_aval(get_aval(p))) for p in flat_p]
    # Outputs that are symbolically zero (float0 tangents) are not outputs of the jaxpr.
    out_zeros = [not h for h in has_out]
    jaxpr = Jaxpr(lin.jaxpr.constvars, invars, lin.jaxpr.outvars, lin.jaxpr.eqns)
    n, aux_tree, _ = split[0]
    result = (out_p[:n], out_zeros, jaxpr, list(lin.consts))
    return (*result, tree_unflatten(aux_tree, out_p[n:])) if has_aux else result


def defjvp(primitive, *jvp_rules):
    """A jvp rule from one function per argument, ``rule(g, *primals, **params)``: the
    output tangent for input tangent ``g`` (``None`` for an argument with no tangent)."""
    _ad_util.defjvp(primitive, *(
        None if rule is None else
        (lambda g, ans, *primals, _rule=rule, **params: _rule(g, *primals, **params))
        for rule in jvp_rules))


def defjvp2(primitive, *jvp_rules):
    """As ``defjvp``, each rule also given the primal output: ``rule(g, ans, *primals)``."""
    _ad_util.defjvp(primitive, *jvp_rules)


def deflinear(primitive, transpose_rule):
    """A primitive linear in all its arguments; ``transpose_rule(ct, **params)`` gives the
    cotangents of all of them."""
    def transpose(ct, *args, **params):
        if type(ct) is Zero:
            return [Zero(a.aval) if is_undefined_primal(a) else None for a in args]
        return transpose_rule(ct, **params)
    _ad_util.deflinear(primitive)
    primitive_transposes[primitive] = transpose


def deflinear2(primitive, transpose_rule):
    """As ``deflinear``, the transpose rule also given the arguments:
    ``transpose_rule(ct, *args, **params)``."""
    def transpose(ct, *args, **params):
        if type(ct) is Zero:
            return [Zero(a.aval) if is_undefined_primal(a) else None for a in args]
        return transpose_rule(ct, *args, **params)
    _ad_util.deflinear(primitive)
    primitive_transposes[primitive] = transpose


def get_primitive_transpose(p):
    """The transpose rule of ``p``; NotImplementedError when it has none."""
    try:
        return primitive_transposes[p]
    except KeyError:
        raise NotImplementedError(
            f"Transpose rule (for reverse-mode differentiation) for '{p}' not implemented"
        ) from None
