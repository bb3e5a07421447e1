"""Batching of ``custom_jvp``/``custom_vjp`` functions: the custom rules are batched along
with the function (custom_derivatives.py binds them; a batch trace comes here)."""
from __future__ import annotations

from plax.core.jaxpr import ClosedJaxpr, consts_as_inputs
from plax.core.primitive import NamedCallable
from plax.core.rules import Zero, not_mapped
from plax.core.trace import set_current_trace
from plax.first_order import reductions as _reductions
from plax.first_order.batch_util import batched_aval, move_batch_dim, moveaxis
from plax.transforms.vmap import batch_flat, batch_jaxpr


# Mapped inputs move their batch to 0. Outputs come back batched at 0, or (when no input is
# mapped, so only a closed-over value could batch them) unbatched where the first of the
# function and its rules to run leaves them so; every later run lines up with that.
def _front(vals, dims):
    return ([v if d is None else moveaxis(v, d, 0) for v, d in zip(vals, dims)],
            [None if d is None else 0 for d in dims])


class _OutDims:
    """Where a batched call's outputs carry the batch (0 or not_mapped), settled by the
    first run of the batched function or rule."""

    __slots__ = ("batch_all", "dims")

    def __init__(self, batch_all: bool):
        self.batch_all = batch_all
        self.dims = None

    def settle(self, got):
        if self.dims is None:
            self.dims = [0 if self.batch_all or d is not not_mapped else not_mapped for d in got]
        return self.dims


def _place(x, got, want, size, name):
    """``x`` (batched at ``got``; a per-example ``Zero``) with its batch at ``want``."""
    if type(x) is Zero:
        return x if want is not_mapped else Zero(batched_aval(x.aval, 0, size))
    if want is not_mapped:
        if got is not not_mapped:
            raise ValueError(f"A custom rule of {name}, batched by vmap, gives an output that "
                             "varies along the mapped axis where the function's does not; make "
                             "the rule's primal output depend on the same inputs as the function.")
        return x
    return move_batch_dim(x, got, 0, size)


def _per_example_zero(t, d):
    """A symbolic zero tangent/cotangent of a value batched at ``d`` (or unbatched)."""
    a = t.aval
    return Zero(a if d is None else a.update(shape=a.shape[1:]))


def _batch_with_zeros(fn, vals, dims, axis):
    """Batch ``fn(*vals) -> list`` where some inputs are symbolic ``Zero``s (passed through,
    per example) and some outputs may be ``Zero``s (per example, not_mapped).
    Returns ``(outs, out_dims)``."""
    live = [type(v) is not Zero for v in vals]
    zeros_out = []

    def flat(*xs):
        it = iter(xs)
        full = [next(it) if lv else _per_example_zero(v, d) for v, d, lv in zip(vals, dims, live)]
        outs = fn(*full)
        zeros_out[:] = [o if type(o) is Zero else None for o in outs]
        return [o for o in outs if type(o) is not Zero]

    outs, out_dims = batch_flat(flat, [v for v, lv in zip(vals, live) if lv],
                                [d for d, lv in zip(dims, live) if lv], axis)
    it = iter(zip(outs, out_dims))
    pairs = [next(it) if z is None else (z, not_mapped) for z in zeros_out]
    return [o for o, _ in pairs], [d for _, d in pairs]


def _batched_fun(fun, dims, axis, rec, name):
    """The function run per example, for inputs batched at ``dims``."""
    def batched(*vals):
        outs, got = batch_flat(fun, list(vals), dims, axis, name)
        return [_place(o, g, w, axis.size, name) for o, g, w in zip(outs, got, rec.settle(got))]
    return batched


def _batched_jvp(jvp, dims, axis, rec, name):
    """The flat jvp rule run per example; tangents are batched where their primals are."""
    n = len(dims)

    def batched(primals, tangents):
        def per_example(*xs):
            outs, tans = jvp(list(xs[:n]), list(xs[n:]))
            return list(outs) + list(tans)

        res, got = _batch_with_zeros(per_example, list(primals) + list(tangents),
                                     list(dims) * 2, axis)
        m = len(res) // 2
        want = rec.settle([p if p is not not_mapped else t for p, t in zip(got[:m], got[m:])])
        return ([_place(o, g, w, axis.size, name) for o, g, w in zip(res[:m], got[:m], want)],
                [_place(t, g, w, axis.size, name) for t, g, w in zip(res[m:], got[m:], want)])
    return batched


def _batched_fwd(fwd, dims, axis, rec, name, bwd_name):
    """The flat fwd rule run per example; its backward rule comes back batched too."""
    def batched(primals, perturbed):
        box = {}

        def per_example(*ps):
            outs, res, bwd_rule = fwd(list(ps), perturbed)
            box["bwd"], box["n_out"] = bwd_rule, len(outs)
            return list(outs) + list(res)

        got_vals, got_dims = batch_flat(per_example, list(primals), dims, axis)
        m = box["n_out"]
        want = rec.settle(got_dims[:m])
        outs = [_place(o, g, w, axis.size, name)
                for o, g, w in zip(got_vals[:m], got_dims[:m], want)]
        bwd = _batched_bwd(box["bwd"], got_dims[m:], dims, want, axis)
        return outs, got_vals[m:], NamedCallable(bwd, bwd_name)
    return batched


def _batched_bwd(bwd_rule, res_dims, leaf_dims, ct_dims, axis):
    """The backward rule run per example; cotangents of unbatched inputs sum over the batch."""

    def bwd(res, cts):
        n_res = len(res)
        in_cts, got = _batch_with_zeros(
            lambda *xs: bwd_rule(list(xs[:n_res]), list(xs[n_res:])),
            list(res) + list(cts), list(res_dims) + list(ct_dims), axis)
        out = []
        for c, g, d in zip(in_cts, got, leaf_dims):
            if d is not_mapped and g is not not_mapped:
                c = _reductions.reduce_sum(c, (g,))
            elif d is not not_mapped:
                c = _place(c, g, 0, axis.size, "")
            out.append(c)
        return out
    return bwd


def batch_functions(prim, trace, args, params):
    """Bind again below ``trace`` with the function and rules batched (as JAX does, even when
    no input is mapped: the function may close over values of this vmap)."""
    vals, dims = zip(*(trace.to_batch_info(x) for x in args)) if args else ((), ())
    vals, dims = _front(vals, dims)
    axis, name = trace.axis, params["name"]
    rec = _OutDims(any(d is not not_mapped for d in dims))
    new = dict(params, fun=NamedCallable(_batched_fun(params["fun"], dims, axis, rec, name), name))
    if "jvp" in params:  # custom_jvp_call (custom_vjp_call holds fwd and bwd)
        new["jvp"] = NamedCallable(_batched_jvp(params["jvp"], dims, axis, rec, name),
                                   repr(params["jvp"]))
    else:
        new["fwd"] = NamedCallable(_batched_fwd(params["fwd"], dims, axis, rec, name,
                                                repr(params["bwd"])), repr(params["fwd"]))
    with set_current_trace(trace.parent):
        outs = prim.bind(*vals, **new)
    return [trace.wrap(o, d) for o, d in zip(outs, rec.dims)]


def staged_jvp_call_rule(prim):
    """The batch rule of the staged ``custom_jvp_call`` primitive ``prim``."""
    def rule(axis, vals, dims, *, call_jaxpr, jvp, num_consts, symbolic_zeros, name):
        vals, dims = _front(vals, dims)
        n_out = len(call_jaxpr.out_avals)
        body, consts, _ = batch_jaxpr(call_jaxpr, axis, dims, description=name,
                                      out_dims=[0] * n_out)
        callee, _ = consts_as_inputs(ClosedJaxpr(body, consts))
        batched_rule = _batched_jvp(jvp, dims[num_consts:], axis, _OutDims(True), name)
        outs = prim.bind(*consts, *vals, call_jaxpr=callee,
                         jvp=NamedCallable(batched_rule, repr(jvp)),
                         num_consts=len(consts) + num_consts,
                         symbolic_zeros=symbolic_zeros, name=name)
        return outs, [0] * n_out
    return rule


def staged_vjp_call_rule(prim):
    """The batch rule of the staged ``custom_vjp_call`` primitive ``prim``."""
    def rule(axis, vals, dims, *, call_jaxpr, fwd, bwd, num_consts, symbolic_zeros, name):
        vals, dims = _front(vals, dims)
        n_out = len(call_jaxpr.out_avals)
        body, consts, _ = batch_jaxpr(call_jaxpr, axis, dims, description=name,
                                      out_dims=[0] * n_out)
        callee, _ = consts_as_inputs(ClosedJaxpr(body, consts))
        batched_rule = _batched_fwd(fwd, dims[num_consts:], axis, _OutDims(True), name, repr(bwd))
        outs = prim.bind(*consts, *vals, call_jaxpr=callee,
                         fwd=NamedCallable(batched_rule, repr(fwd)),
                         bwd=bwd, num_consts=len(consts) + num_consts,
                         symbolic_zeros=symbolic_zeros, name=name)
        return outs, [0] * n_out
    return rule


def custom_lin_rule(prim):
    """The batch rule of the staged ``custom_lin`` primitive ``prim``."""
    def rule(axis, vals, dims, *, num_res, bwd, out_avals, nonzero, diff_out):
        """The linear part of a custom_vjp function, for batched residuals or tangents."""
        vals, dims = _front(vals, dims)
        tan_dims = iter(dims[num_res:])
        # Cotangents come back for every primal input; those without a tangent are dropped.
        in_dims = [next(tan_dims) if nz else None for nz in nonzero]
        batched = tuple(batched_aval(a, 0, axis.size) for a in out_avals)
        batched_rule = _batched_bwd(bwd, dims[:num_res], in_dims, [0] * len(out_avals), axis)
        outs = prim.bind(*vals, num_res=num_res, bwd=NamedCallable(batched_rule, repr(bwd)),
                         out_avals=batched, nonzero=nonzero, diff_out=diff_out)
        return outs, [0] * len(outs)
    return rule
