"""Differentiation entry points: jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev,
hessian, linear_transpose.

Forward mode runs the JVP trace; reverse mode linearizes (partial evaluation of
the JVP) and transposes the linear jaxpr. All of them take and return pytrees.
"""
from __future__ import annotations

import functools

import numpy as np

from plax import tree_util
from plax.core import dtypes
from plax.core.jaxpr import eval_jaxpr
from plax.core.trace import get_aval
from plax.transforms.jvp import Zero, instantiate, jvp_flat, tangent_aval
from plax.transforms.linearize import linearize_flat
from plax.transforms.transpose import backward_pass


def _fun_name(fun) -> str:
    return getattr(fun, "__name__", None) or type(fun).__name__


def _flat_fun(fun, in_tree, has_aux: bool, box: list):
    """``fun`` on flat leaves returning flat leaves; output (and aux) trees go into ``box``."""
    def flat(*leaves):
        args = tree_util.tree_unflatten(in_tree, list(leaves))
        out = fun(*args)
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError("has_aux=True requires the function to return a pair "
                                f"(output, auxiliary data), got {type(out).__name__}.")
            out, aux = out
            box.append(("aux", aux))
        leaves_out, out_tree = tree_util.tree_flatten(out)
        box.append(("out", out_tree))
        return leaves_out
    return flat


def _unbox(box):
    d = dict(box[-2:] if len(box) >= 2 and box[-2][0] == "aux" else box[-1:])
    return d["out"], d.get("aux")


def _zeros(aval):
    return np.zeros(aval.shape, aval.dtype)


def _check_tangent(p, t, where="jvp"):
    pa, ta = get_aval(p), get_aval(t)
    want = tangent_aval(pa).dtype
    if ta.dtype != want:
        raise TypeError(
            f"primal and tangent arguments to {where} do not match; dtypes must be equal, or in "
            f"case of int/bool primal dtype the tangent dtype must be float0. Got primal dtype "
            f"{pa.dtype.name} and so expected tangent dtype {want.name}, but got tangent dtype "
            f"{ta.dtype.name} instead.")
    if pa.shape != ta.shape:
        raise ValueError(f"{where} called with different primal and tangent shapes; Got primal "
                         f"shape {pa.shape} and tangent shape as {ta.shape}")


def jvp(fun, primals, tangents, has_aux: bool = False):
    """``(fun(*primals), J(primals) @ tangents)``: forward-mode differentiation."""
    for name, value in (("primal", primals), ("tangent", tangents)):
        if not isinstance(value, (tuple, list)):
            raise TypeError(f"{name} and tangent arguments to jax.jvp must be tuples or lists; "
                            f"found {type(value).__name__}.")
    p_leaves, p_tree = tree_util.tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_util.tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise TypeError("primal and tangent arguments to jax.jvp must have the same tree "
                        f"structure; primals have tree structure {p_tree} whereas tangents have "
                        f"tree structure {t_tree}.")
    for p, t in zip(p_leaves, t_leaves):
        _check_tangent(p, t, "jax.jvp")
    ts = [Zero(tangent_aval(get_aval(p))) if get_aval(t).dtype == dtypes.float0 else t
          for p, t in zip(p_leaves, t_leaves)]
    box = []
    outs, out_t = jvp_flat(_flat_fun(lambda *a: fun(*a), p_tree, has_aux, box), p_leaves, ts,
                           _fun_name(fun))
    out_tree, aux = _unbox(box)
    primal_out = tree_util.tree_unflatten(out_tree, outs)
    tangent_out = tree_util.tree_unflatten(out_tree, [_materialize(t) for t in out_t])
    return (primal_out, tangent_out, aux) if has_aux else (primal_out, tangent_out)


def _materialize(t):
    """A real array for an output tangent or cotangent (float0 zeros for integer types)."""
    if type(t) is Zero:
        return _zeros(t.aval) if t.aval.dtype == dtypes.float0 else instantiate(t)
    return t


def linearize(fun, *primals, has_aux: bool = False):
    """``(fun(*primals), f_jvp)`` where ``f_jvp`` evaluates the JVP without re-tracing."""
    p_leaves, p_tree = tree_util.tree_flatten(primals)
    box = []
    outs, lin, _ = linearize_flat(_flat_fun(lambda *a: fun(*a), p_tree, has_aux, box), p_leaves,
                                  _fun_name(fun))
    out_tree, aux = _unbox(box)
    inexact = [dtypes.is_inexact(get_aval(p).dtype) for p in p_leaves]

    def f_jvp(*tangents):
        t_leaves, t_tree = tree_util.tree_flatten(tangents)
        if t_tree != p_tree:
            raise TypeError(f"linearized function called with tangents of tree structure {t_tree}; "
                            f"expected the primals' structure {p_tree}.")
        for p, t in zip(p_leaves, t_leaves):
            _check_tangent(p, t, "the linearized function")
        used = [t for t, keep in zip(t_leaves, inexact) if keep]
        return tree_util.tree_unflatten(out_tree, eval_jaxpr(lin.jaxpr, lin.consts, *used))

    primal_out = tree_util.tree_unflatten(out_tree, outs)
    return (primal_out, f_jvp, aux) if has_aux else (primal_out, f_jvp)


def vjp(fun, *primals, has_aux: bool = False, reduce_axes=()):
    """``(fun(*primals), f_vjp)`` where ``f_vjp(ct)`` pulls a cotangent back to the inputs."""
    p_leaves, p_tree = tree_util.tree_flatten(primals)
    box = []
    outs, lin, _ = linearize_flat(_flat_fun(lambda *a: fun(*a), p_tree, has_aux, box), p_leaves,
                                  _fun_name(fun))
    out_tree, aux = _unbox(box)
    out_avals = [get_aval(o) for o in outs]
    inexact = [dtypes.is_inexact(get_aval(p).dtype) for p in p_leaves]

    def f_vjp(ct):
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != out_tree:
            raise TypeError(f"Tree structure of cotangent input {ct_tree}, does not match "
                            f"structure of primal output {out_tree}.")
        for c, a in zip(ct_leaves, out_avals):
            ca, want = get_aval(c), tangent_aval(a)
            if ca.shape != want.shape or (ca.dtype != want.dtype and want.dtype != dtypes.float0):
                raise ValueError(
                    f"Type of cotangent input to vjp pullback function ({ca.str_short()}) is not "
                    f"the expected tangent type ({want.str_short()}) of corresponding primal "
                    f"output with dtype {a.dtype.name}.")
        cts = [None if get_aval(c).dtype == dtypes.float0 or not dtypes.is_inexact(a.dtype)
               else c for c, a in zip(ct_leaves, out_avals)]
        lin_cts = backward_pass(lin.jaxpr, lin.consts, [True] * len(lin.jaxpr.invars), cts)
        it = iter(lin_cts)
        result = []
        for p, keep in zip(p_leaves, inexact):
            if keep:
                c = next(it)
                result.append(instantiate(c) if type(c) is Zero else c)
            else:
                result.append(_zeros(tangent_aval(get_aval(p))))
        return tree_util.tree_unflatten(p_tree, result)

    primal_out = tree_util.tree_unflatten(out_tree, outs)
    return (primal_out, f_vjp, aux) if has_aux else (primal_out, f_vjp)


def _check_argnums(argnums, nargs, fname):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not isinstance(i, int):
            raise TypeError(f"argnums must be an int or a tuple of ints, got {argnums!r}.")
        if not -nargs <= i < nargs:
            raise TypeError(f"differentiating with respect to argnums={argnums} requires at "
                            f"least {max(nums) + 1} positional arguments to be passed by the "
                            f"caller, but got only {nargs} positional arguments.")
    return tuple(i % nargs for i in nums)


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
    @functools.wraps(fun)
    def value_and_grad_f(*args, **kwargs):
        nums = _check_argnums(argnums, len(args), _fun_name(fun))
        for i in nums:
            for leaf in tree_util.tree_leaves(args[i]):
                _check_input_dtype(leaf, holomorphic, allow_int, "grad")

        def partial_fun(*dyn):
            full = list(args)
            for i, d in zip(nums, dyn):
                full[i] = d
            return fun(*full, **kwargs)

        res = vjp(partial_fun, *[args[i] for i in nums], has_aux=has_aux)
        ans, f_vjp = res[0], res[1]
        _check_scalar_output(ans, holomorphic)
        g = f_vjp(np.ones((), get_aval(ans).dtype))
        g = g[0] if isinstance(argnums, int) else tuple(g)
        return ((ans, res[2]), g) if has_aux else (ans, g)

    return value_and_grad_f


def _check_scalar_output(ans, holomorphic):
    if not _is_array(ans):
        raise TypeError(f"Gradient only defined for scalar-output functions. Output was {ans!r}.")
    aval = get_aval(ans)
    if aval.shape != ():
        raise TypeError(f"Gradient only defined for scalar-output functions. Output had shape: "
                        f"{aval.shape}.")
    if holomorphic:
        if not dtypes.is_complex(aval.dtype):
            raise TypeError(f"grad with holomorphic=True requires outputs with complex dtype, "
                            f"but got {aval.dtype.name}.")
    elif not dtypes.is_float(aval.dtype):
        raise TypeError(f"grad requires real-valued outputs (output dtype that is a sub-dtype of "
                        f"np.floating), but got {aval.dtype.name}. For holomorphic "
                        "differentiation, pass holomorphic=True. For differentiation of "
                        "non-holomorphic functions involving complex outputs, use plax.vjp directly.")


def _is_array(x) -> bool:
    try:
        get_aval(x)
        return True
    except TypeError:
        return False


def grad(fun, argnums=0, has_aux: bool = False, holomorphic: bool = False,
         allow_int: bool = False, reduce_axes=()):
    """A function returning the gradient of scalar-valued ``fun`` with respect to args[argnums]."""
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, reduce_axes)

    @functools.wraps(fun)
    def grad_f(*args, **kwargs):
        out, g = vg(*args, **kwargs)
        return (g, out[1]) if has_aux else g

    return grad_f




# --- Jacobians ------------------------------------------------------------------------------
# Built from one jvp per input element (jacfwd) or one backward pass per output element
# (jacrev); each is exact. The Jacobian pytree nests the input structure inside the output's.
def _jac_inputs(args, nums, holomorphic, what):
    dyn = tuple(args[i] for i in nums)
    for leaf in tree_util.tree_leaves(dyn):
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
    return dyn


def _assemble(rows, out_leaves_avals, in_avals, by_output: bool):
    """Jacobian blocks from per-element results.

    ``rows[k]`` holds one result per output leaf (jacfwd: varying input element k) or per
    input leaf (jacrev: varying output element k); blocks come out shaped out + in.
    """
    import plax.numpy as jnp
    blocks = []
    if not by_output:  # jacfwd: rows over all input elements, entries per output leaf
        for o, oa in enumerate(out_leaves_avals):
            per_in, start = [], 0
            for ia in in_avals:
                n = int(np.prod(ia.shape, dtype=np.int64))
                col = [rows[k][o] for k in range(start, start + n)]
                start += n
                stacked = jnp.stack(col, axis=-1) if col else jnp.zeros(oa.shape + (0,), oa.dtype)
                per_in.append(jnp.reshape(stacked, oa.shape + ia.shape))
            blocks.append(per_in)
    else:  # jacrev: rows over all output elements, entries per input leaf
        start = 0
        for oa in out_leaves_avals:
            m = int(np.prod(oa.shape, dtype=np.int64))
            per_in = []
            for i, ia in enumerate(in_avals):
                col = [rows[k][i] for k in range(start, start + m)]
                stacked = jnp.stack(col, axis=0) if col else jnp.zeros((0,) + ia.shape, ia.dtype)
                per_in.append(jnp.reshape(stacked, oa.shape + ia.shape))
            start += m
            blocks.append(per_in)
    return blocks


def _one_hots(avals):
    """Basis vectors, one per element of the leaves described by ``avals``."""
    for j, a in enumerate(avals):
        n = int(np.prod(a.shape, dtype=np.int64))
        for k in range(n):
            leaves = [_zeros(b) for b in avals]
            flat = leaves[j].reshape(-1)
            flat[k] = 1
            yield [np.asarray(x) for x in leaves]


def jacfwd(fun, argnums=0, has_aux: bool = False, holomorphic: bool = False):
    """The Jacobian of ``fun`` by forward mode (one JVP per input element)."""
    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        nums = _check_argnums(argnums, len(args), _fun_name(fun))
        dyn = _jac_inputs(args, nums, holomorphic, "jacfwd")
        in_leaves, in_tree = tree_util.tree_flatten(dyn)
        in_avals = [get_aval(x) for x in in_leaves]

        def f_dyn(*d):
            full = list(args)
            for i, v in zip(nums, d):
                full[i] = v
            return fun(*full, **kwargs)

        rows, out_tree, aux, ans = [], None, None, None
        for basis in _one_hots(in_avals):
            res = jvp(f_dyn, dyn, tuple(tree_util.tree_unflatten(in_tree, basis)), has_aux=has_aux)
            ans, tan = res[0], res[1]
            aux = res[2] if has_aux else None
            t_leaves, out_tree = tree_util.tree_flatten(tan)
            rows.append(t_leaves)
        if out_tree is None:  # no input elements: evaluate once for the output structure
            res = f_dyn(*dyn)
            ans, aux = (res if has_aux else (res, None))
            out_tree = tree_util.tree_structure(ans)
        out_avals = [get_aval(x) for x in tree_util.tree_leaves(ans)]
        blocks = _assemble(rows, out_avals, in_avals, by_output=False)
        jac = _nest(blocks, out_tree, in_tree, isinstance(argnums, int))
        return (jac, aux) if has_aux else jac

    return jacfun


def jacrev(fun, argnums=0, has_aux: bool = False, holomorphic: bool = False,
           allow_int: bool = False):
    """The Jacobian of ``fun`` by reverse mode (one backward pass per output element)."""
    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        nums = _check_argnums(argnums, len(args), _fun_name(fun))
        dyn = _jac_inputs(args, nums, holomorphic, "jacrev") if not allow_int else \
            tuple(args[i] for i in nums)
        in_leaves, in_tree = tree_util.tree_flatten(dyn)
        in_avals = [get_aval(x) for x in in_leaves]

        def f_dyn(*d):
            full = list(args)
            for i, v in zip(nums, d):
                full[i] = v
            return fun(*full, **kwargs)

        res = vjp(f_dyn, *dyn, has_aux=has_aux)
        ans, f_vjp = res[0], res[1]
        out_leaves, out_tree = tree_util.tree_flatten(ans)
        out_avals = [get_aval(x) for x in out_leaves]
        rows = []
        for basis in _one_hots(out_avals):
            cts = f_vjp(tree_util.tree_unflatten(out_tree, basis))
            rows.append(tree_util.tree_leaves(cts))
        blocks = _assemble(rows, out_avals, in_avals, by_output=True)
        jac = _nest(blocks, out_tree, in_tree, isinstance(argnums, int))
        return (jac, res[2]) if has_aux else jac

    return jacfun


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
    """The transpose of linear ``fun`` (evaluated at ``primals``' types), as a function of
    output cotangents returning input cotangents with the primals' dtypes."""
    p_leaves, p_tree = tree_util.tree_flatten(primals)
    for leaf in p_leaves:
        if not dtypes.is_inexact(get_aval(leaf).dtype):
            raise TypeError(f"linear_transpose only supports [float or complex] -> [float or "
                            f"complex], and integer -> integer functions, but got "
                            f"{get_aval(leaf).dtype.name} input.")
    box = []
    _, lin, _ = linearize_flat(_flat_fun(lambda *a: fun(*a), p_tree, False, box),
                               [np.zeros(get_aval(x).shape, get_aval(x).dtype) for x in p_leaves],
                               _fun_name(fun))
    out_tree, _ = _unbox(box)
    out_avals = [v.aval for v in lin.jaxpr.outvars]

    def transposed(*cts):
        ct = cts[0] if len(cts) == 1 else cts
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != out_tree:
            raise TypeError(f"linear_transpose: cotangent tree structure {ct_tree} does not match "
                            f"the function's output structure {out_tree}.")
        for c, a in zip(ct_leaves, out_avals):
            if get_aval(c).shape != a.shape or get_aval(c).dtype != a.dtype:
                raise TypeError(f"linear_transpose: cotangent {get_aval(c).str_short()} does not "
                                f"match the output type {a.str_short()}.")
        res = backward_pass(lin.jaxpr, lin.consts, [True] * len(p_leaves), ct_leaves)
        out = [instantiate(r) if type(r) is Zero else r for r in res]
        return tree_util.tree_unflatten(p_tree, out)

    return transposed
