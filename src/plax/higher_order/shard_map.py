"""shard_map_p: a per-device program over the manual axes of a mesh.

The equation holds the body as a jaxpr over *local* (per-device) values, the mesh, one
PartitionSpec per operand and per result, and the manual axes. Its operands and results
are global arrays: operand ``i`` is split into blocks as ``in_specs[i]`` says and each
device runs the body on its block; the result blocks are put together as ``out_specs``
say. Under jit it lowers to Shardy's ``sdy.manual_computation``, the collectives inside
to partition-mode collectives (``lax/collectives.py``); eagerly it runs as a jit of the
one equation over the mesh.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from plax.core import dtypes
from plax.core.avals import ShapedArray, abstractify, physical_aval
from plax.core.caches import BoundedCache, WeakKeyCache
from plax.core.dce import dce_jaxpr, jaxpr_has_effects
from plax.core.jaxpr import (ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var, consts_as_inputs,
                             eval_jaxpr)
from plax.core import replication
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, batch_rules, body_context_rules,
                             dce_rules, impl_rules, is_undefined, jvp_rules, not_mapped,
                             partial_eval_rules, param_printers, register_lowering,
                             replication_rules, tangent_aval, transpose_rules)
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import Tracer, extend_axis_env, get_aval
from plax.first_order import arithmetic as _arith
from plax.first_order import collectives  # (also sets core.replication's implicit pvary)
from plax.first_order import shapes as _shapes
from plax.first_order.batch_util import move_batch_dim
from plax.core.effects import has_ordered_effects, nested_effect_rules, without_order
from plax.lowering.stablehlo import lower_jaxpr_body
from plax.runtime import dispatch, jitted, spmd
from plax.runtime.array import CONCRETE
from plax.sharding.mesh import Mesh, context_mesh, manual_mesh, same_mesh, use_mesh
from plax.sharding.named import NamedSharding, typed_aval
from plax.sharding.partition_spec import PartitionSpec
from plax.transforms.toolkit import batch_jaxpr, jvp_jaxpr, partial_eval_jaxpr, transpose_jaxpr

__all__ = ["shard_map_p", "local_aval", "global_aval", "check_out_replication", "body_context"]

shard_map_p = Primitive("shard_map", multiple_results=True)


def _parts(mesh, spec: PartitionSpec, dim: int, manual) -> int:
    return math.prod(mesh.shape[a] for a in spec.axes_of(dim) if a in manual)


def local_aval(aval: ShapedArray, mesh, spec: PartitionSpec, manual,
               check_vma: bool = False) -> ShapedArray:
    """The type of one device's block of a global value split as ``spec`` (with
    ``check_vma``, varying over the manual axes the spec splits it over, and over those of
    an enclosing shard_map the value already varies over)."""
    shape = tuple(d // _parts(mesh, spec, i, manual) for i, d in enumerate(aval.shape))
    if not check_vma:
        return ShapedArray(shape, aval.dtype, aval.weak_type)
    vma = replication.vma(aval) | frozenset(a for a in spec.mesh_axes() if a in manual)
    return ShapedArray(shape, aval.dtype, aval.weak_type,
                       manual_axis_type=replication.varying_type(vma, mesh.axis_names))


def global_aval(aval: ShapedArray, mesh, spec: PartitionSpec, manual) -> ShapedArray:
    """The type of the global value whose blocks (split as ``spec``) have type ``aval``."""
    shape = tuple(d * _parts(mesh, spec, i, manual) for i, d in enumerate(aval.shape))
    out = ShapedArray(shape, aval.dtype, aval.weak_type)  # outside: varying over nothing
    return typed_aval(out, NamedSharding(mesh, spec)) if mesh.explicit_axes else out


def _abstract(*avals, jaxpr: ClosedJaxpr, mesh, in_specs, out_specs, manual_axes, check_vma):
    return [global_aval(v.aval, mesh, s, manual_axes)
            for v, s in zip(jaxpr.jaxpr.outvars, out_specs)]


_programs = BoundedCache("eager shard_map programs", 256)


def _impl(*args, jaxpr, mesh, in_specs, out_specs, manual_axes, check_vma):
    """Eagerly: the one equation, jitted over the mesh, with the operands laid out by their
    specs."""
    if not isinstance(mesh, Mesh):  # named by its axes: on the devices of the arguments
        mesh = spmd.placement(args, [None] * len(args), [NamedSharding(mesh, PartitionSpec())],
                              "shard_map")[1]
    params = dict(jaxpr=jaxpr, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                  manual_axes=manual_axes, check_vma=check_vma)
    avals = [abstractify(a) for a in args]
    key = (jaxpr, mesh, in_specs, out_specs, manual_axes, check_vma, tuple(avals))
    closed = _programs.get(key)
    if closed is None:
        closed = _programs.put(key, ClosedJaxpr(
            dispatch.one_equation_jaxpr(shard_map_p, avals, params), []))
    ins = tuple(NamedSharding(mesh, s) for s in in_specs)
    outs = tuple(NamedSharding(mesh, s) for s in out_specs)
    # Arguments laid out otherwise are split as their specs say first (as JAX's eager
    # shard_map does; a jit given these in_shardings would refuse committed ones).
    args = [dispatch.reshard(a, s) if type(a) in CONCRETE and a._committed and
            a.sharding != s and not a.sharding.is_equivalent_to(s, len(a.shape)) else a
            for a, s in zip(args, ins)]  # (the != first: the HLO comparison is dear)
    return jitted.call_jitted(
        jitted.JitCall(closed, "shard_map", (False,) * len(args), True, None, None, ins, outs),
        args)


def _shardings_text(symbol, mesh, specs, avals) -> str:
    texts = []
    for spec, aval in zip(specs, avals):
        attr = NamedSharding(mesh, spec).shardy_attribute(physical_aval(aval).ndim, symbol)
        texts.append(attr[len("#sdy.sharding"):])  # the per-value form: <@mesh, [...]>
    return f"#sdy.sharding_per_value<[{', '.join(texts)}]>"


def _lowering(ctx, *args, jaxpr, mesh, in_specs, out_specs, manual_axes, check_vma):
    """``sdy.manual_computation``: the body on local blocks, over the manual axes."""
    symbol = ctx.fn.module.mesh_symbol(mesh)
    if not isinstance(mesh, Mesh):  # named by its axes: the concrete mesh the module uses
        mesh = next(m for m, name in ctx.fn.module.meshes.items() if name == symbol)
    body = jaxpr.jaxpr
    local_in = [v.aval for v in body.invars]
    local_out = [v.aval for v in body.outvars]
    inner = ctx.module_context.replace(mesh=mesh, manual_axes=frozenset(manual_axes))
    if mesh.size == 1:
        # One device: each block is the whole array, so the body is inlined, as JAX lowers
        # manual axes of size 1 (XLA does not partition a one-device program, and would
        # leave a manual computation's shape conversions unexpanded).
        return _inline(ctx, body, args, mesh, manual_axes, inner)

    def build(c, *block_args):
        if has_ordered_effects(body):  # ordered on each device, from a token of its own
            c.fn.token = c.fn.emit("stablehlo.after_all", [], [], ["!stablehlo.token"])[0]
        # Lowerings that trace lax code (loops) check collectives' axes again: bind them. The
        # types were checked when the body was traced: lowering code is traced unchecked.
        with body_context(mesh, manual_axes, False):
            return lower_jaxpr_body(c.fn, body, list(block_args)), local_out
    region = ctx.region(local_in, build, terminator="sdy.return", module_context=inner)
    names = ", ".join(f'"{a}"' for a in mesh.axis_names if a in manual_axes)
    props = (f"in_shardings = {_shardings_text(symbol, mesh, in_specs, ctx.avals_in)}, "
             f"out_shardings = {_shardings_text(symbol, mesh, out_specs, ctx.avals_out)}, "
             f"manual_axes = #sdy<manual_axes{{{names}}}>")
    return ctx.op("sdy.manual_computation", list(args), ctx.avals_in, ctx.avals_out,
                  props=props, regions=region)


def _inline(ctx, body, args, mesh, manual_axes, inner) -> list:
    """The body lowered in place (under the manual axes) rather than in a region."""
    fn = ctx.fn
    outer_context, outer_token = fn.module_context, fn.token
    fn.module_context = inner
    try:
        if has_ordered_effects(body):  # its own order, as in a manual computation
            fn.token = fn.emit("stablehlo.after_all", [], [], ["!stablehlo.token"])[0]
        with body_context(mesh, manual_axes, False):
            return lower_jaxpr_body(fn, body, list(args))
    finally:
        fn.module_context, fn.token = outer_context, outer_token


class _AxesShown(frozenset):
    """Manual axes as the jaxpr printer shows them: in a fixed (sorted) order."""

    def __repr__(self):
        return "frozenset({" + ", ".join(repr(a) for a in sorted(self)) + "})"


abstract_eval_rules[shard_map_p] = _abstract
# Printed under JAX's name for it: the axes this shard_map makes manual (an enclosing one's
# are manual already).
param_printers[shard_map_p] = lambda p: dict(sorted(
    {**{k: v for k, v in p.items() if k != "manual_axes"},
     "newly_manual_axes": _AxesShown(p["manual_axes"])}.items()))
# Nested in another shard_map (over other axes): its results vary as its operands do.
replication_rules[shard_map_p] = lambda ins, *, out_specs, **params: [
    replication.union(ins)] * len(out_specs)
impl_rules[shard_map_p] = _impl
register_lowering(shard_map_p, _lowering)
body_context_rules[shard_map_p] = lambda params: _axes_bound(params)
nested_effect_rules[shard_map_p] = lambda inner, params: without_order(inner)


# --- the replication check of the outputs --------------------------------------------------------
def _set_text(names) -> str:
    return "{" + ",".join(sorted(names)) + "}"


def check_out_replication(name: str, out_avals, out_specs, mesh, manual) -> None:
    """JAX's error for an output whose spec leaves out a manual axis it may vary over."""
    for spec, aval in zip(out_specs, out_avals):
        allowed = frozenset(a for a in spec.mesh_axes() if a in manual)
        extra = (replication.vma(aval) & frozenset(manual)) - allowed
        if extra:
            raise ValueError(
                f"shard_map applied to the function '{name}' was given out_specs which require "
                "replication which can't be statically inferred given the mesh:\n\n"
                f"The mesh given has shape {tuple(mesh.axis_sizes)} with corresponding axis "
                f"names {tuple(mesh.axis_names)}.\n\nout_specs is {spec} which implies that the "
                "corresponding output value is only varying across mesh axes "
                f"{_set_text(allowed)} and not {_set_text(extra)}, but it was "
                f"inferred to be possibly varying over {_set_text(extra)}\n\nCheck if these "
                "output values are meant to be replicated over those mesh axes. If not, "
                "consider revising the corresponding out_specs entries. If so, consider "
                "disabling the check by passing the check_vma=False argument to "
                "`plax.shard_map` (check_rep=False to the experimental shard_map).")


# --- transformation rules -------------------------------------------------------------------------
@contextlib.contextmanager
def body_context(mesh, manual, check_vma: bool):
    """What tracing (or transforming) a body needs: the manual axes bound, the context mesh
    with them typed Manual (what ``get_abstract_mesh()`` shows inside), and with
    ``check_vma`` the varying axes in the types."""
    typed = frozenset(manual)
    context = context_mesh()
    if context is not None and same_mesh(context, mesh):  # nested: the outer's too
        typed |= frozenset(context.manual_axes)
    inner = manual_mesh(mesh, typed)
    with extend_axis_env([(a, mesh.shape[a]) for a in mesh.axis_names if a in manual]), \
            use_mesh(inner):
        if check_vma:
            with replication.checking(manual, mesh.axis_names):
                yield
        else:
            yield


def _axes_bound(params):
    return body_context(params["mesh"], params["manual_axes"], params["check_vma"])


def _bind(body: ClosedJaxpr, args, in_specs, out_specs, params):
    callee, consts = consts_as_inputs(body)
    return shard_map_p.bind(*consts, *args, **dict(
        params, jaxpr=callee, in_specs=(PartitionSpec(),) * len(consts) + tuple(in_specs),
        out_specs=tuple(out_specs)))


def _jvp(primals, tangents, *, jaxpr, in_specs, out_specs, **params):
    """The body's jvp, over the same mesh: tangents are split as their primals."""
    nonzeros = [type(t) is not Zero for t in tangents]
    out_tan = [tangent_aval(a) for a in jaxpr.out_avals]
    differentiable = [a.dtype != dtypes.float0 for a in out_tan]
    with _axes_bound(params):
        body, out_nz = jvp_jaxpr(jaxpr, nonzeros, instantiate=differentiable,
                                 description="jvp(shard_map)")
    t_specs = [s for s, nz in zip(in_specs, nonzeros) if nz]
    o_t_specs = [s for s, nz in zip(out_specs, out_nz) if nz]
    outs = _bind(body, [*primals, *(t for t in tangents if type(t) is not Zero)],
                 [*in_specs, *t_specs], [*out_specs, *o_t_specs], params)
    m = len(out_specs)
    it = iter(outs[m:])
    global_tan = [global_aval(tangent_aval(v.aval), params["mesh"], s, params["manual_axes"])
                  for v, s in zip(jaxpr.jaxpr.outvars, out_specs)]
    return outs[:m], [next(it) if nz else Zero(a) for a, nz in zip(global_tan, out_nz)]


_summed_bodies = WeakKeyCache("shard_map unchecked transposes")


def _unmentioned(spec: PartitionSpec, mesh, manual) -> tuple:
    """The manual axes a spec does not split over, in mesh order."""
    named = frozenset(spec.mesh_axes())
    return tuple(a for a in mesh.axis_names if a in manual and a not in named)


def _shared_cotangent(ct, spec, mesh, manual):
    """Unchecked (``check_vma=False``): a result's cotangent, divided by the number of devices
    that each hold a copy of that result (as JAX's transpose does; the per-device sums of the
    transposed body count each copy once)."""
    copies = math.prod(mesh.shape[a] for a in _unmentioned(spec, mesh, manual))
    if type(ct) is Zero or copies == 1 or get_aval(ct).dtype == dtypes.float0:
        return ct
    aval = get_aval(ct)
    return _arith.div(ct, float(copies) if aval.weak_type else np.asarray(copies, aval.dtype))


def _summed_cotangents(body: ClosedJaxpr, in_specs, mesh, manual) -> ClosedJaxpr:
    """Unchecked: the transposed body with the cotangent of each operand summed over the
    manual axes its spec leaves out (each device holds only its own contribution to the
    cotangent of a replicated operand)."""
    axes = tuple(_unmentioned(s, mesh, manual) for s in in_specs)
    if not any(axes):
        return body
    hit = _summed_bodies.get(body, axes)  # (the same body again: the same compiled program)
    if hit is not None:
        return hit

    def summed(*xs):
        outs = eval_jaxpr(body.jaxpr, body.consts, *xs)
        return [collectives.psum_p.bind(o, axes=a, axis_index_groups=None)[0] if a else o
                for o, a in zip(outs, axes)]
    jaxpr, consts = trace_to_jaxpr(summed, body.in_avals, description="transpose(shard_map)")
    result = ClosedJaxpr(jaxpr, consts)
    if not any(isinstance(c, Tracer) for c in consts):
        _summed_bodies.put(body, axes, result)
    return result


def _transpose(cts, *args, jaxpr, in_specs, out_specs, **params):
    """The body's transpose: cotangents of the outputs in (split as the outputs), those of the
    linear operands out (split as the operands). Unchecked, JAX's convention: result
    cotangents are divided over their replicas and operand cotangents summed over theirs."""
    mesh, manual, unchecked = params["mesh"], params["manual_axes"], not params["check_vma"]
    linear = [is_undefined(a) for a in args]
    if unchecked:
        cts = [_shared_cotangent(c, s, mesh, manual) for c, s in zip(cts, out_specs)]
    nonzero = [type(c) is not Zero for c in cts]
    with _axes_bound(params):
        body = transpose_jaxpr(jaxpr, linear, nonzero, description="transpose(shard_map)")
        if unchecked:
            body = _summed_cotangents(
                body, [s for s, lin in zip(in_specs, linear) if lin], mesh, manual)
    res = [a for a, lin in zip(args, linear) if not lin]
    res_specs = [s for s, lin in zip(in_specs, linear) if not lin]
    ct_in = [c for c in cts if type(c) is not Zero]
    ct_specs = [s for s, nz in zip(out_specs, nonzero) if nz]
    lin_specs = [s for s, lin in zip(in_specs, linear) if lin]
    outs = iter(_bind(body, [*res, *ct_in], [*res_specs, *ct_specs], lin_specs, params))
    return [next(outs) if lin else None for lin in linear]


def _batch(axis, vals, dims, *, jaxpr, in_specs, out_specs, **params):
    """vmap: the batch dimension moves to the front of every batched operand (the specs shift
    by one) and stays whole on each device, or, with ``spmd_axis_name``, is split over those
    mesh axes (each device batches its share)."""
    vals = [v if d is not_mapped else move_batch_dim(v, d, 0, axis.size)
            for v, d in zip(vals, dims)]
    dims = [not_mapped if d is not_mapped else 0 for d in dims]
    spmd = axis.spmd_name
    spmd = () if spmd is None else (spmd,) if isinstance(spmd, str) else tuple(spmd)
    mesh, manual = params["mesh"], params["manual_axes"]
    if any(a not in manual for a in spmd):
        raise ValueError(f"vmap's spmd_axis_name {spmd} must name manual axes of the shard_map "
                         f"(here {sorted(manual)}).")
    parts = math.prod(mesh.shape[a] for a in spmd)
    if axis.size % parts:
        raise ValueError(f"vmap of size {axis.size} cannot be split over mesh axes {spmd} of "
                         f"total size {parts} (spmd_axis_name): the size must divide evenly.")
    local_axis = type(axis)(axis.name, axis.size // parts, None) if spmd else axis
    with _axes_bound(params):
        body, consts, out_dims = batch_jaxpr(jaxpr, local_axis, dims,
                                             description="vmap(shard_map)",
                                             out_dims=[0] * len(out_specs))
    lead = None if not spmd else spmd[0] if len(spmd) == 1 else spmd
    shift = lambda s: PartitionSpec(lead, *s)  # noqa: E731
    specs = [s if d is not_mapped else shift(s) for s, d in zip(in_specs, dims)]
    outs = _bind(ClosedJaxpr(body, consts), vals, specs, [shift(s) for s in out_specs], params)
    return list(outs), [0] * len(outs)


jvp_rules[shard_map_p] = _jvp
transpose_rules[shard_map_p] = _transpose
batch_rules[shard_map_p] = _batch


# --- partial evaluation: a known shard_map now, an unknown one of residuals staged ---------------
def _reshaped(v, shape):
    """A var of ``v``'s value reshaped to ``shape``, and the equation computing it."""
    out = Var(v.aval.update(shape=shape))
    return out, JaxprEqn([v], [out], _shapes.reshape_p,
                         {"new_sizes": shape, "dimensions": None, "sharding": None})


def _residuals_as_rows(known: ClosedJaxpr, unknown: ClosedJaxpr, num_res: int):
    """The bodies with every residual at least 1-D: residuals leave the known shard_map split
    over all manual axes along their first dimension (each device keeps its own), so a
    scalar one travels as shape (1,)."""
    kj, uj = known.jaxpr, unknown.jaxpr
    n_known = len(kj.outvars) - num_res
    k_out, k_eqns, u_in, u_eqns = list(kj.outvars), list(kj.eqns), list(uj.invars), []
    for i in range(num_res):
        v = k_out[n_known + i]
        if isinstance(v, Literal) or v.aval.shape == ():
            if isinstance(v, Literal):  # a constant residual: computed into a var first
                lit, v = v, Var(v.aval)
                k_eqns.append(JaxprEqn([lit], [v], _shapes.reshape_p, {
                    "new_sizes": (), "dimensions": None, "sharding": None}))
            row, eqn = _reshaped(v, (1,))
            k_eqns.append(eqn)
            k_out[n_known + i] = row
            scalar = uj.invars[i]
            row_in = Var(scalar.aval.update(shape=(1,)))
            u_in[i] = row_in
            u_eqns.append(JaxprEqn([row_in], [scalar], _shapes.reshape_p,
                                   {"new_sizes": (), "dimensions": None, "sharding": None}))
    known = ClosedJaxpr(Jaxpr(kj.constvars, kj.invars, k_out, k_eqns), known.consts)
    unknown = ClosedJaxpr(Jaxpr(uj.constvars, u_in, uj.outvars, u_eqns + list(uj.eqns)),
                          unknown.consts)
    return known, unknown


def _partial_eval(trace, args, params):
    closed, in_specs, out_specs = params["jaxpr"], params["in_specs"], params["out_specs"]
    manual = [a for a in params["mesh"].axis_names if a in params["manual_axes"]]
    unknowns = [trace.is_unknown(a) for a in args]
    with _axes_bound(params):
        known, unknown, out_unknowns, num_res = partial_eval_jaxpr(
            closed, unknowns, instantiate=False, description="shard_map")
    known, unknown = _residuals_as_rows(known, unknown, num_res)
    res_spec = PartitionSpec(tuple(manual) if len(manual) > 1 else manual[0])
    known_body, known_consts = consts_as_inputs(known)
    known_in = [*known_consts, *(a for a, u in zip(args, unknowns) if not u)]
    k_specs = [PartitionSpec()] * len(known_consts) + \
        [s for s, u in zip(in_specs, unknowns) if not u]
    k_out_specs = [s for s, u in zip(out_specs, out_unknowns) if not u] + [res_spec] * num_res
    known_out = trace.known(shard_map_p, known_in, dict(
        params, jaxpr=known_body, in_specs=tuple(k_specs), out_specs=tuple(k_out_specs)))
    n_known = len(known_out) - num_res
    unknown_out = []
    if any(out_unknowns):
        u_body, u_consts = consts_as_inputs(unknown)
        u_in = [*u_consts, *known_out[n_known:], *(a for a, u in zip(args, unknowns) if u)]
        u_specs = [PartitionSpec()] * len(u_consts) + [res_spec] * num_res + \
            [s for s, u in zip(in_specs, unknowns) if u]
        unknown_out = trace.stage(shard_map_p, u_in, dict(
            params, jaxpr=u_body, in_specs=tuple(u_specs),
            out_specs=tuple(s for s, u in zip(out_specs, out_unknowns) if u)))
    k, u = iter(known_out[:n_known]), iter(unknown_out)
    return [next(u) if unk else next(k) for unk in out_unknowns]


partial_eval_rules[shard_map_p] = _partial_eval


# --- dead code: a shard_map of the used results, on the operands they need -----------------------
def _dce(used_outputs, eqn):
    closed = eqn.params["jaxpr"]
    if not any(used_outputs) and not jaxpr_has_effects(closed):
        return [False] * len(eqn.invars), None
    body, used_inputs = dce_jaxpr(closed.jaxpr, used_outputs)
    if all(used_inputs) and all(used_outputs) and len(body.eqns) == len(closed.jaxpr.eqns):
        return used_inputs, eqn
    new = eqn.replace(
        invars=[v for v, u in zip(eqn.invars, used_inputs) if u],
        outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u],
        params=dict(eqn.params, jaxpr=ClosedJaxpr(body, closed.consts),
                    in_specs=tuple(s for s, u in zip(eqn.params["in_specs"], used_inputs) if u),
                    out_specs=tuple(s for s, u in zip(eqn.params["out_specs"], used_outputs)
                                    if u)))
    return used_inputs, new


dce_rules[shard_map_p] = _dce
