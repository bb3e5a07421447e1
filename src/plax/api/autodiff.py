"""Differentiation entry points: jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev,
hessian, linear_transpose.

Forward mode runs the JVP trace; reverse mode linearizes (partial evaluation of
the JVP) and transposes the linear jaxpr. All of them take and return pytrees.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core.hi_types import MutableHiType, hi_type_of, hi_value_types, is_hi_value
from plax.higher_order import ref_effects
from plax.core.jaxpr import eval_jaxpr
from plax.core.source_info import fun_name, wraps
from plax.core.trace import EvalTrace, Tracer, current_trace, get_aval
from plax.transforms.jvp import jvp_flat
from plax.transforms.linearize import linearize_flat, trace_linear_flat
from plax.transforms.dce import stage_without_dead_code
from plax.transforms.transpose import backward_pass
from plax.core.avals import sharding_in_types
from plax.core.rules import Zero, differentiable, tangent_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import comparison as _cmp
from plax.first_order.ad_util import instantiate
from plax.first_order.conversion import convert_element_type, convert_with_weak_type
from plax.first_order.shapes import broadcasted_iota, reshape
from plax.first_order.slicing import slice_in_dim
from plax.runtime.dispatch import array_from_host
from plax.core.trace import transform_name_stack
from plax.core.tracebacks import api_boundary


def _flat_fun(fun, in_tree, has_aux: bool, box: dict, transform: str | None = "jvp"):
    """``fun`` on flat leaves returning flat leaves, its equations under ``transform`` in the
    name stack (as ``jvp(...)``).

    The output tree goes into ``box``; with ``has_aux``, so do the aux tree and leaves,
    and the traced aux leaves are appended to the outputs (so that the transformation
    hands back their primal values, see ``_unbox``).
    """
    def flat(*leaves):
        args = tree_util.tree_unflatten(in_tree, list(leaves))
        if transform is None:
            out = fun(*args)
        else:
            with transform_name_stack(transform):
                out = fun(*args)
        traced = []
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError("expected function with aux output to return a two-element "
                                f"tuple (output, auxiliary data), but got type "
                                f"{type(out).__name__}.")
            out, aux = out
            aux_leaves, aux_tree = tree_util.tree_flatten(aux)
            box["aux"] = (aux_tree, aux_leaves)
            traced = [x for x in aux_leaves if isinstance(x, Tracer)]
        leaves_out, out_tree = tree_util.tree_flatten(out)
        box["out"] = out_tree
        box["num_aux"] = len(traced)
        return leaves_out + traced
    return flat


def _unbox(box, outs):
    """``(output tree, output leaves, aux)`` from the flat outputs of a ``_flat_fun``."""
    n = len(outs) - box["num_aux"]
    if "aux" not in box:
        return box["out"], list(outs[:n]), None
    aux_tree, aux_leaves = box["aux"]
    it = iter(outs[n:])
    aux = [next(it) if isinstance(x, Tracer) else x for x in aux_leaves]
    return box["out"], list(outs[:n]), tree_util.tree_unflatten(aux_tree, aux)


def _zeros(aval):
    from plax.core.symbolic_shapes import shape_is_symbolic
    if shape_is_symbolic(aval.shape):  # (a shape-polymorphic export's VJP): zeros traced
        from plax.first_order.shapes import broadcast
        return broadcast(np.zeros((), aval.dtype), aval.shape)
    return np.zeros(aval.shape, aval.dtype)


def _check_tangent(p, t, where="jvp"):
    pa, ta = get_aval(p), get_aval(t)
    want = tangent_aval(pa).dtype
    if ta.dtype != want:
        raise TypeError(
            f"primal and tangent arguments to {where} do not match; dtypes must be equal, or in "
            f"case of int/bool primal dtype the tangent dtype must be float0. Got primal dtype "
            f"{pa.dtype.name} and so expected tangent dtype {want!r}, but got tangent dtype "
            f"{ta.dtype.name} instead.")
    if pa.shape != ta.shape:
        raise ValueError(f"{where} called with different primal and tangent shapes; Got primal "
                         f"shape {pa.shape} and tangent shape as {ta.shape}")


@api_boundary
def jvp(fun, primals, tangents, has_aux: bool = False):
    """``(fun(*primals), J(primals) @ tangents)``: forward-mode differentiation."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("primal and tangent arguments to jax.jvp must be tuples or lists; "
                        f"found {type(primals).__name__} and {type(tangents).__name__}.")
    p_leaves, p_tree = tree_util.tree_flatten(tuple(primals))
    _refuse_references(p_leaves)
    t_leaves, t_tree = tree_util.tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise TypeError("primal and tangent arguments to jax.jvp must have the same tree "
                        f"structure; primals have tree structure {p_tree} whereas tangents have "
                        f"tree structure {t_tree}.")
    for p, t in zip(p_leaves, t_leaves):
        _check_tangent(p, t, "jax.jvp")
    ts = [Zero(tangent_aval(get_aval(p))) if get_aval(t).dtype == dtypes.float0 else
          _typed_like(t, get_aval(p)) for p, t in zip(p_leaves, t_leaves)]
    box = {}
    outs, out_t = jvp_flat(_flat_fun(lambda *a: fun(*a), p_tree, has_aux, box), p_leaves, ts,
                           fun_name(fun))
    out_tree, outs, aux = _unbox(box, outs)
    primal_out = tree_util.tree_unflatten(out_tree, outs)
    tangent_out = tree_util.tree_unflatten(out_tree,
                                           [_materialize(t) for t in out_t[:len(outs)]])
    return (primal_out, tangent_out, aux) if has_aux else (primal_out, tangent_out)


def _materialize(t):
    """A real array for an output tangent or cotangent (float0 zeros for integer types)."""
    if type(t) is Zero:
        return _zeros(t.aval) if t.aval.dtype == dtypes.float0 else instantiate(t)
    return t


@api_boundary
def linearize(fun, *primals, has_aux: bool = False):
    """``(fun(*primals), f_jvp)`` where ``f_jvp`` evaluates the JVP without re-tracing."""
    p_leaves, p_tree = tree_util.tree_flatten(primals)
    _refuse_references(p_leaves)
    box = {}
    flat = _flat_fun(lambda *a: fun(*a), p_tree, has_aux, box)
    outs, lin, has_out = linearize_flat(flat, p_leaves, fun_name(fun),
                                        num_aux=lambda: box["num_aux"])
    out_tree, outs, aux = _unbox(box, outs)
    inexact = [differentiable(get_aval(p)) for p in p_leaves]
    out_tangent_avals = [tangent_aval(get_aval(o)) for o in outs]

    def f_jvp(residuals, *tangents):
        t_leaves, t_tree = tree_util.tree_flatten(tangents)
        if t_tree != p_tree:
            raise ValueError("linearized function called on tangent values inconsistent with "
                             f"the original primal values: tangents have tree structure "
                             f"{t_tree}, expected the primals' structure {p_tree}.")
        for p, t in zip(p_leaves, t_leaves):
            pa, ta = get_aval(p), get_aval(t)
            if ta.shape != pa.shape or ta.dtype != tangent_aval(pa).dtype:
                raise ValueError(
                    "linearized function called on tangent values inconsistent with the "
                    f"original primal values: got tangent {ta.str_short()} for primal "
                    f"{pa.str_short()}, expected {tangent_aval(pa).str_short()}.")
        used = [_typed_like(t, get_aval(p)) for t, p, keep in zip(t_leaves, p_leaves, inexact)
                if keep]
        it = iter(eval_jaxpr(lin.jaxpr, residuals, *used))
        return tree_util.tree_unflatten(out_tree, [next(it) if h else _zeros(a) for a, h in
                                                   zip(out_tangent_avals, has_out)])

    primal_out = tree_util.tree_unflatten(out_tree, outs)
    # A pytree (its leaves are the residuals), so it can be passed into and out of jit.
    f_jvp = tree_util.Partial(f_jvp, list(lin.consts))
    return (primal_out, f_jvp, aux) if has_aux else (primal_out, f_jvp)


def _refuse_references(leaves) -> None:
    """A mutable array reference differentiated as an input: JAX's error (its value can be)."""
    if hi_value_types:
        for x in leaves:
            if _is_ref(x):
                raise ValueError(
                    f"Expected cotangent type {hi_type_of(x)} but got "
                    f"{hi_type_of(x).inner_aval.str_short(short_dtypes=False)}: a mutable array reference "
                    "cannot be differentiated with respect to. Differentiate with respect to "
                    "its value (ref[...]) instead, or close over the reference.")


@api_boundary
def vjp(fun, *primals, has_aux: bool = False, reduce_axes=()):
    """``(fun(*primals), f_vjp)`` where ``f_vjp(ct)`` pulls a cotangent back to the inputs."""
    p_leaves, p_tree = tree_util.tree_flatten(primals)
    if hi_value_types and any(_is_ref(x) for x in p_leaves):
        # JAX differentiates the function as usual (a reference is closed over) and
        # refuses a reference's cotangent when the VJP function is called.
        kept, put_back = ref_effects.refs_passed_in(primals)
        res = vjp(lambda *ks: fun(*put_back(ks)), *kept, has_aux=has_aux)

        def refused(*_):
            _refuse_references(p_leaves)
        return (res[0], refused, *res[2:])
    box = {}
    flat = _flat_fun(lambda *a: fun(*a), p_tree, has_aux, box)
    outs, lin, has_out = linearize_flat(flat, p_leaves, fun_name(fun),
                                        num_aux=lambda: box["num_aux"])
    out_tree, outs, aux = _unbox(box, outs)
    out_avals = [get_aval(o) for o in outs]
    in_avals = [get_aval(p) for p in p_leaves]

    def f_vjp(residuals, ct):
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != out_tree:
            raise ValueError(f"unexpected tree structure of the cotangent passed to the VJP "
                             f"function of {fun_name(fun)}: got {ct_tree}, but the function's "
                             f"output has structure {out_tree}.")
        for c, a in zip(ct_leaves, out_avals):
            ca, want = get_aval(c), tangent_aval(a)
            if ca.shape != want.shape or (ca.dtype != want.dtype and want.dtype != dtypes.float0):
                raise ValueError(
                    f"unexpected type (shape/dtype) of the cotangent passed to the VJP function: "
                    f"got {ca.str_short()}, but expected {want.str_short()} (the tangent type of "
                    f"the corresponding output, {a.str_short()}).")
        cts = [None if get_aval(c).dtype == dtypes.float0 or not differentiable(a)
               else _typed_like(c, a) for c, a, h in zip(ct_leaves, out_avals, has_out) if h]
        with transform_name_stack("transpose"):
            lin_cts = iter(backward_pass(lin.jaxpr, residuals, [True] * len(lin.jaxpr.invars),
                                         cts))
        result = [_input_cotangent(next(lin_cts), tangent_aval(a)) if differentiable(a)
                  else _zeros(tangent_aval(a)) for a in in_avals]
        return tree_util.tree_unflatten(p_tree, result)

    f_vjp.in_tree, f_vjp.in_avals = p_tree, in_avals  # for with_refs
    primal_out = tree_util.tree_unflatten(out_tree, outs)
    f_vjp = VJPFunction(f_vjp, list(lin.consts))  # a pytree of the residuals
    return (primal_out, f_vjp, aux) if has_aux else (primal_out, f_vjp)


# --- with_refs: where each input's cotangent goes (JAX's jax.ad markers) ---------------------
@dataclasses.dataclass(frozen=True)
class GradValue:
    """with_refs: return this input's cotangent (what a plain VJP call does)."""


@dataclasses.dataclass(frozen=True)
class DontWant:
    """with_refs: this input's cotangent is not wanted (``DidntWant()`` comes back)."""


@dataclasses.dataclass(frozen=True)
class GradRef:
    """Returned by with_refs where the cotangent was added into the Ref given."""


@dataclasses.dataclass(frozen=True)
class DidntWant:
    """Returned by with_refs where ``DontWant()`` was given."""


# Markers returned in place of a cotangent hold no arrays (pytrees without leaves).
tree_util.register_pytree_node(GradRef, lambda _: ((), None), lambda _, __: GradRef())
tree_util.register_pytree_node(DidntWant, lambda _: ((), None), lambda _, __: DidntWant())


def _is_ref(x) -> bool:
    return is_hi_value(x) and isinstance(hi_type_of(x), MutableHiType)


def _deliver(want, ct):
    if isinstance(want, GradValue):
        return ct
    if isinstance(want, DontWant):
        return DidntWant()
    want[...] = _arith.add(want[...], ct)  # a Ref: accumulate into it
    return GradRef()


def _pull_with_refs(f_vjp, in_tree, wants, residuals, ct):
    cts = tree_util.tree_leaves(f_vjp(residuals, ct))
    return tree_util.tree_unflatten(in_tree, [_deliver(w, c) for w, c in zip(wants, cts)])


class VJPFunction(tree_util.Partial):
    """What ``vjp`` returns: ``f_vjp(ct)`` pulls a cotangent back to the inputs;
    ``f_vjp.with_refs(*wants)`` says per input leaf where its cotangent goes."""

    def with_refs(self, *maybe_ct_refs):
        """A VJP function that, per input leaf, returns the cotangent (``ad.GradValue()``),
        skips it (``ad.DontWant()``: ``ad.DidntWant()`` comes back) or adds it into the
        given Ref (``ad.GradRef()`` comes back). No arguments: every cotangent returned."""
        in_tree = self.func.in_tree
        if not maybe_ct_refs:
            wants = [GradValue()] * in_tree.num_leaves
        else:
            wants, given = tree_util.tree_flatten(maybe_ct_refs)
            if given != in_tree:
                raise ValueError(f"with_refs takes one marker or Ref per input of the "
                                 f"differentiated function, in its structure {in_tree}; got "
                                 f"{given}.")
        for w in wants:
            if not isinstance(w, (GradValue, DontWant)) and not _is_ref(w):
                raise TypeError(f"with_refs takes jax.ad.GradValue(), jax.ad.DontWant() or a "
                                f"Ref per input, got {w!r}.")
        in_avals = self.func.in_avals
        for w, a in zip(wants, in_avals):
            if _is_ref(w) and (w.shape != a.shape or w.dtype != tangent_aval(a).dtype):
                raise ValueError(f"Accumulator aval mismatch: expected "
                                 f"{tangent_aval(a).str_short()}, got a Ref of "
                                 f"{get_aval(w[...]).str_short()}.")
        return tree_util.Partial(functools.partial(_pull_with_refs, self.func, in_tree,
                                                   tuple(wants)), *self.args)


tree_util.register_pytree_node(
    VJPFunction, lambda p: ((p.args, p.keywords), p.func),
    lambda func, children: VJPFunction(func, *children[0], **children[1]))


def _input_cotangent(ct, aval):
    """A cotangent as a value of the input's type (dtype, and sharding in the type)."""
    if type(ct) is Zero:
        return instantiate(Zero(aval))
    if get_aval(ct).dtype != aval.dtype:
        from plax.first_order.conversion import convert_element_type
        ct = convert_element_type(ct, aval.dtype)
    return _typed_like(ct, aval)


def _typed_like(value, aval):
    """``value`` resharded to ``aval``'s sharding in types when they differ: tangents and
    cotangents have their primals' types, as in JAX (only with Explicit meshes)."""
    if not sharding_in_types[0] or type(value) is Zero or not hasattr(value, "aval"):
        return value
    have, want = get_aval(value)._sharding, getattr(aval, "_sharding", None)
    if have == want:
        return value
    from plax.first_order.sharding_constraint import reshard_p
    if want is None:
        want = type(have)(have.mesh, (None,) * len(aval.shape))
    return reshard_p.bind(value, sharding=want)


def _with_args_at(fun, args, kwargs, nums):
    """``fun`` as a function of ``args[i] for i in nums`` only (the others held fixed)."""
    def f(*dyn):
        full = list(args)
        for i, d in zip(nums, dyn):
            full[i] = d
        return fun(*full, **kwargs)
    return f


def _check_argnums(argnums, nargs, fname):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise ValueError(f"{fname}: argnums=() asks to differentiate with respect to no "
                         "argument; pass at least one position, e.g. argnums=0.")
    for i in nums:
        if not isinstance(i, int):
            raise TypeError(f"argnums must be an int or a tuple of ints, got {argnums!r}.")
        if not -nargs <= i < nargs:
            raise TypeError(f"differentiating with respect to argnums={argnums} requires at "
                            f"least {max(nums) + 1} positional arguments to be passed by the "
                            f"caller, but got only {nargs} positional arguments.")
    norm = tuple(i % nargs for i in nums)
    if len(set(norm)) != len(norm):
        # JAX fails here too (with a TypeError from inside the function); say why.
        raise TypeError(f"argnums={argnums} names positional argument "
                        f"{next(i for i in norm if norm.count(i) > 1)} more than once: "
                        "each argument can be differentiated only once.")
    return norm


def _check_input_dtype(x, holomorphic: bool, allow_int: bool, what: str):
    dt = get_aval(x).dtype
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError(f"{what} with holomorphic=True requires inputs with complex dtype, "
                            f"but got {dt.name}.")
    elif not dtypes.is_inexact(dt) and not allow_int:
        raise TypeError(f"{what} requires real- or complex-valued inputs (input dtype that is a "
                        f"sub-dtype of np.inexact), but got {dt.name}. If you want to use "
                        "Boolean- or integer-valued inputs, use vjp or set allow_int to True.")


def value_and_grad(fun, argnums=0, has_aux: bool = False, holomorphic: bool = False,
                   allow_int: bool = False, reduce_axes=()):
    """A function returning ``(fun(*args), gradient of fun with respect to args[argnums])``."""
    @wraps(fun)
    @api_boundary
    def value_and_grad_f(*args, **kwargs):
        return _value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, args, kwargs,
                               keep_value=True)

    return value_and_grad_f


def grad(fun, argnums=0, has_aux: bool = False, holomorphic: bool = False,
         allow_int: bool = False, reduce_axes=()):
    """A function returning the gradient of scalar-valued ``fun`` with respect to args[argnums]."""
    @wraps(fun)
    @api_boundary
    def grad_f(*args, **kwargs):
        out, g = _value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, args, kwargs,
                                 keep_value=False)
        return (g, out[1]) if has_aux else g

    return grad_f


def _value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, args, kwargs, keep_value):
    nums = _check_argnums(argnums, len(args), fun_name(fun))
    for i in nums:
        for leaf in tree_util.tree_leaves(args[i]):
            _check_input_dtype(leaf, holomorphic, allow_int, "grad")

    partial_fun = _with_args_at(fun, args, kwargs, nums)

    def run():
        res = vjp(partial_fun, *[args[i] for i in nums], has_aux=has_aux)
        ans, f_vjp = res[0], res[1]
        _check_scalar_output(ans, holomorphic, "grad")
        g = f_vjp(_one_like(ans))
        if isinstance(current_trace(), EvalTrace):  # eager: the seed itself is an Array too
            g = tree_util.tree_map(_as_array, g)
        g = g[0] if isinstance(argnums, int) else tuple(g)
        return ((ans, res[2]) if has_aux else ans), g

    # Under jit/make_jaxpr, drop what the primal computation staged but the result does not
    # need (with grad, the output value itself).
    return stage_without_dead_code(
        run, lambda r: r if keep_value else ((None, r[0][1]) if has_aux else None, r[1]))


def _as_array(x):
    """A host value as an Array; float0 gradients (of integer inputs) stay NumPy, as in JAX."""
    if isinstance(x, Tracer) or hasattr(x, "aval") or np.result_type(x) == dtypes.float0:
        return x
    return array_from_host(x)


def _one_like(ans):
    """The seed cotangent 1 of scalar ``ans``'s type (weakly typed if ``ans`` is)."""
    aval = get_aval(ans)
    if aval.weak_type:
        return complex(1) if dtypes.is_complex(aval.dtype) else 1.0
    return np.ones((), aval.dtype)


def _check_scalar_output(ans, holomorphic, what):
    if not _is_array(ans):
        raise TypeError(f"Gradient only defined for scalar-output functions. Output was {ans!r}.")
    aval = get_aval(ans)
    if aval.shape != ():
        raise TypeError(f"Gradient only defined for scalar-output functions. Output had shape: "
                        f"{aval.shape}.")
    _check_output_dtype(aval.dtype, holomorphic, what)


def _check_output_dtype(dt, holomorphic, what):
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError(f"{what} with holomorphic=True requires outputs with complex dtype, "
                            f"but got {dt.name}.")
    elif not dtypes.is_float(dt):
        hint = ("For differentiation of functions with integer outputs, use plax.vjp directly."
                if not dtypes.is_inexact(dt) else
                "For holomorphic differentiation, pass holomorphic=True. For differentiation of "
                "non-holomorphic functions involving complex outputs, use plax.vjp directly.")
        raise TypeError(f"{what} requires real-valued outputs (output dtype that is a sub-dtype "
                        f"of np.floating), but got {dt.name}. {hint}")


def _is_array(x) -> bool:
    try:
        get_aval(x)
        return True
    except TypeError:
        return False


# --- Jacobians ------------------------------------------------------------------------------
# jacfwd pushes every standard basis vector of the inputs through one jvp, and jacrev pulls
# every basis vector of the outputs back through one vjp, both batched with vmap. The
# Jacobian pytree nests the input structure inside the output's.
def _check_each_input(dyn, check) -> None:
    """``check`` every input leaf, by tree_map as JAX does: the inputs' own pytree nodes are
    rebuilt around the checks' ``None`` results (an unflatten that refuses None fails here,
    as on JAX)."""
    tree_util.tree_map(check, dyn)


def _jac_inputs(args, nums, holomorphic, what):
    dyn = tuple(args[i] for i in nums)
    _check_each_input(dyn, lambda leaf: _check_jacfwd_input(leaf, holomorphic, what))
    return dyn


def _check_jacfwd_input(leaf, holomorphic, what):
    dt = get_aval(leaf).dtype
    if holomorphic and not dtypes.is_complex(dt):
        raise TypeError(f"{what} with holomorphic=True requires inputs with complex dtype, "
                        f"but got {dt.name}.")
    if not holomorphic and not dtypes.is_float(dt):
        raise TypeError(f"{what} requires real-valued inputs (input dtype that is a sub-dtype "
                        f"of np.floating), but got {dt.name}. For holomorphic "
                        "differentiation, pass holomorphic=True. For differentiation of "
                        "non-holomorphic functions involving complex inputs or integer "
                        f"inputs, use plax.jvp directly.")


def _std_basis(avals):
    """One basis array per leaf, shaped (total elements,) + leaf shape: together the rows of
    the identity over all the leaves' elements. Built by the program (an iota comparison,
    as JAX builds it), not a host constant: XLA fuses it into its consumers."""
    sizes = [int(np.prod(a.shape, dtype=np.int64)) for a in avals]
    total, start, out = sum(sizes), 0, []
    for a, n in zip(avals, sizes):
        rows = broadcasted_iota(np.int32, (total, n), 0)
        cols = broadcasted_iota(np.int32, (total, n), 1)
        block = convert_element_type(_cmp.eq(_arith.add(rows, np.int32(-start)), cols),
                                     a.dtype)  # ones at [start + j, j]
        out.append(reshape(block, (total,) + a.shape))
        start += n
    return out


def _split_jac(flat, out_aval, in_avals):
    """The per-input blocks (shaped out + in) of a forward-mode Jacobian whose input elements
    run along the last axis of ``flat``."""
    blocks, start = [], 0
    for ia in in_avals:
        n = int(np.prod(ia.shape, dtype=np.int64))
        part = slice_in_dim(flat, start, start + n, 1, get_aval(flat).ndim - 1) \
            if len(in_avals) > 1 else flat
        blocks.append(reshape(part, out_aval.shape + ia.shape))
        start += n
    return blocks


def _weak_like(x, example_aval):
    """A Jacobian block keeps the weak type of the value it is shaped after (the output for
    jacfwd, the input for jacrev), as JAX's do."""
    aval = get_aval(x)
    if example_aval.weak_type and not aval.weak_type and aval.dtype == example_aval.dtype:
        return convert_with_weak_type(x, aval.dtype, True)
    return x


def _float0_to_zeros(t, like_aval):
    """Integer values have float0 tangents; in a Jacobian their blocks are zeros."""
    return _zeros(like_aval) if get_aval(t).dtype == dtypes.float0 else t


def jacfwd(fun, argnums=0, has_aux: bool = False, holomorphic: bool = False):
    """The Jacobian of ``fun`` by forward mode (a jvp per input element, vmapped)."""
    from plax.api.vmap import vmap

    @wraps(fun)
    @api_boundary
    def jacfun(*args, **kwargs):
        nums = _check_argnums(argnums, len(args), fun_name(fun))
        dyn = _jac_inputs(args, nums, holomorphic, "jacfwd")
        in_leaves, in_tree = tree_util.tree_flatten(dyn)
        in_avals = [get_aval(x) for x in in_leaves]
        f_dyn = _with_args_at(fun, args, kwargs, nums)
        box = {}

        def push(*basis_leaves):
            tangents = tree_util.tree_unflatten(in_tree, list(basis_leaves))
            res = jvp(f_dyn, dyn, tuple(tangents), has_aux=has_aux)
            out_leaves, box["out_tree"] = tree_util.tree_flatten(res[0])
            tans = [_float0_to_zeros(t, get_aval(o))
                    for o, t in zip(out_leaves, tree_util.tree_leaves(res[1]))]
            return out_leaves, tans, (res[2] if has_aux else None)

        def compute():
            outs, tans, aux = vmap(push, out_axes=(None, -1, None))(*_std_basis(in_avals))
            out_avals = [get_aval(o) for o in outs]
            if holomorphic:
                for a in out_avals:
                    _check_output_dtype(a.dtype, True, "jacfwd")
            blocks = [[_weak_like(b, oa) for b in _split_jac(t, oa, in_avals)]
                      for t, oa in zip(tans, out_avals)]
            jac = _nest(blocks, box["out_tree"], in_tree, isinstance(argnums, int))
            return (jac, aux) if has_aux else jac

        # Under jit, the primal computation is staged but only the Jacobian is returned.
        return stage_without_dead_code(compute, lambda r: r)

    return jacfun


def jacrev(fun, argnums=0, has_aux: bool = False, holomorphic: bool = False,
           allow_int: bool = False):
    """The Jacobian of ``fun`` by reverse mode (a vjp per output element, vmapped)."""
    from plax.api.vmap import vmap

    @wraps(fun)
    @api_boundary
    def jacfun(*args, **kwargs):
        nums = _check_argnums(argnums, len(args), fun_name(fun))
        dyn = tuple(args[i] for i in nums)
        _check_each_input(dyn, lambda x: _check_input_dtype(x, holomorphic, allow_int, "jacrev"))
        in_leaves, in_tree = tree_util.tree_flatten(dyn)
        in_avals = [get_aval(x) for x in in_leaves]
        f_dyn = _with_args_at(fun, args, kwargs, nums)
        return stage_without_dead_code(lambda: _jacrev(f_dyn, dyn, in_avals, in_tree),
                                       lambda r: r)

    def _jacrev(f_dyn, dyn, in_avals, in_tree):
        res = vjp(f_dyn, *dyn, has_aux=has_aux)
        ans, f_vjp = res[0], res[1]
        out_leaves, out_tree = tree_util.tree_flatten(ans)
        out_avals = [get_aval(x) for x in out_leaves]
        for a in out_avals:
            _check_output_dtype(a.dtype, holomorphic, "jacrev")

        def pull(*basis_leaves):
            cts = f_vjp(tree_util.tree_unflatten(out_tree, list(basis_leaves)))
            return [_float0_to_zeros(c, a) for a, c in zip(in_avals, tree_util.tree_leaves(cts))]

        # Per input leaf: (all output elements,) + input shape.
        per_in = vmap(pull)(*_std_basis(out_avals))
        blocks, start = [], 0
        for oa in out_avals:
            m = int(np.prod(oa.shape, dtype=np.int64))
            rows = [slice_in_dim(c, start, start + m) if len(out_avals) > 1 else c
                    for c in per_in]
            blocks.append([_weak_like(reshape(r, oa.shape + ia.shape), ia)
                           for r, ia in zip(rows, in_avals)])
            start += m
        jac = _nest(blocks, out_tree, in_tree, isinstance(argnums, int))
        return (jac, res[2]) if has_aux else jac

    return jacfun


def jacobian(fun, argnums=0, has_aux: bool = False, holomorphic: bool = False,
             allow_int: bool = False):
    """The Jacobian of ``fun``: ``jacrev``'s other name."""
    return jacrev(fun, argnums=argnums, has_aux=has_aux, holomorphic=holomorphic,
                  allow_int=allow_int)


def _nest(blocks, out_tree, in_tree, single_argnum: bool):
    """Jacobian pytree: the output structure with, at each leaf, the input structure."""
    per_out = []
    for per_in in blocks:
        inner = tree_util.tree_unflatten(in_tree, per_in)
        per_out.append(inner[0] if single_argnum else inner)
    return tree_util.tree_unflatten(out_tree, per_out)


def hessian(fun, argnums=0, has_aux: bool = False, holomorphic: bool = False):
    """The Hessian of scalar ``fun``: jacfwd of jacrev."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums,
                  has_aux=has_aux, holomorphic=holomorphic)


def linear_transpose(fun, *primals, reduce_axes=()):
    """The transpose of linear ``fun`` at the types of ``primals``.

    ``primals`` may be arrays or anything with ``shape`` and ``dtype``; only their types
    matter. The result maps output cotangents to input cotangents of the primals' dtypes.
    ``fun`` must map floating/complex inputs to floating/complex outputs, or integers
    to integers.
    """
    p_leaves, p_tree = tree_util.tree_flatten(primals)
    in_avals = [_spec_aval(x) for x in p_leaves]
    box = {}
    lin = trace_linear_flat(_flat_fun(lambda *a: fun(*a), p_tree, False, box, None), in_avals,
                            fun_name(fun))
    out_tree = box["out"]
    out_avals = [v.aval for v in lin.jaxpr.outvars]
    in_dts = [a.dtype for a in in_avals]
    out_dts = [a.dtype for a in out_avals]
    if not (all(dtypes.is_inexact(d) for d in in_dts + out_dts)
            or all(dtypes.is_integer(d) for d in in_dts + out_dts)):
        raise TypeError("linear_transpose only supports [float or complex] -> [float or "
                        "complex], and integer -> integer functions, but got "
                        f"{[d.name for d in in_dts]} -> {[d.name for d in out_dts]}.")

    def transposed(*cts):
        ct = cts[0] if len(cts) == 1 else cts
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != out_tree:
            raise TypeError(f"cotangent tree does not match function output, expected "
                            f"{out_tree} but got {ct_tree}.")
        got = [get_aval(c) for c in ct_leaves]
        if any(g.shape != a.shape or g.dtype != a.dtype for g, a in zip(got, out_avals)):
            raise TypeError("cotangent type does not match function output, expected "
                            f"({', '.join(a.str_short() for a in out_avals)}) but got "
                            f"({', '.join(g.str_short() for g in got)}).")
        res = backward_pass(lin.jaxpr, lin.consts, [True] * len(p_leaves), ct_leaves)
        return tree_util.tree_unflatten(p_tree, [_input_cotangent(r, a)
                                                 for r, a in zip(res, in_avals)])

    return transposed


def _spec_aval(x):
    """The type of a primal given to linear_transpose (an array, scalar or shape/dtype spec)."""
    if not isinstance(x, (np.ndarray, np.generic, Tracer)) and hasattr(x, "shape") \
            and hasattr(x, "dtype"):
        from plax.core.avals import ShapedArray
        return ShapedArray(tuple(x.shape), dtypes.canonicalize_dtype(np.dtype(x.dtype)))
    return get_aval(x)
