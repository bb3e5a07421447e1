"""Every rule table, and the symbolic values rules exchange.

A primitive's rules are registered in these tables from the primitive's own
file (``plax/first_order/<family>.py`` or its ``plax/higher_order/`` file); the
traces, the lowering and the jaxpr tools only read them. Keeping the tables
here, below both ``lax`` and ``transforms``, lets a primitive's file register
all of its rules without importing the transformations.

Table            rule signature
---------------  ----------------------------------------------------------------
abstract_eval    ``rule(*avals, **params) -> aval | [avals]``
impl             ``rule(*args, **params) -> out`` (eager; default: jit of one equation)
jvp              ``rule(primals, tangents, **params) -> (out, tangent_out)``
transpose        ``rule(ct, *args, **params) -> [ct_in | None]`` (``UndefinedPrimal`` args)
batch            ``rule(axis, vals, dims, **params) -> (out, out_dim)``
partial_eval     ``rule(trace, args, params) -> outs`` (``trace.known`` / ``trace.stage``)
dce              ``rule(used_outputs, eqn) -> (used_inputs, eqn | None)``
lowering         ``rule(ctx, *operands, **params) -> str | [str]``, per platform
physical_lowering  same, used instead when an operand or result has an extended dtype
                 (a PRNG key): the op on the keys' physical arrays
collective_axis_names  ``fn(params) -> axis names`` the primitive communicates over
param_printers   ``fn(params) -> params`` as the jaxpr printer shows them
out_sharding_params  the name of the parameter holding a user's ``out_sharding=`` (a type
                 sharding): the lowering pins the results to it
replication_rules  ``rule(ins, **params) -> [frozenset]``: the mesh axes each result varies
                 over inside shard_map, from its operands' (``plax.core.replication``)
sharding_rules   ``rule(avals_in, avals_out, **params) -> [sharding | None]``: the results'
                 shardings in types (``plax.core.sharding_types``)
effect_rules     ``rule(params) -> frozenset of Effect``: an equation's own effects
aval_effect_rules  ``rule(avals, params) -> frozenset``: effects that depend on the input
                 types too (``Primitive.def_effectful_abstract_eval``)
nested_effect_rules  ``rule(inner_effects, params) -> frozenset``: the effects of the jaxprs
                 an equation holds, seen from outside (``plax.core.effects``)
jaxpr_operand_rules  ``rule(params) -> [(jaxpr, positions)]``: for each jaxpr the params
                 hold, the operand each of its inputs receives (default: its inputs are the
                 last operands); effects on its inputs follow them outwards
discharge_rules  ``rule(should_discharge, in_avals, out_avals, *args, **params) ->
                 (new_values, outs)``: the equation with the references marked in
                 ``should_discharge`` passed as their values (``args``); ``new_values`` their
                 values afterwards (None: unchanged) (``plax.transforms.discharge``)
mosaic_lowering  ``rule(ctx, *operands, **params) -> value | [values]``: a Pallas kernel's
                 equation as Mosaic TPU ops (``plax.pallas.mosaic_lowering``)
pp_eqn_rules     ``rule(eqn, printer) -> str``: an equation as the jaxpr printer shows it
                 (``printer.name(atom)``, ``printer.out_binder(var)``) instead of
                 ``outs = prim[params] ins``
checkify_rules   ``rule(trace, args, params) -> outs``: the primitive under checkify, adding
                 its checks (``plax.interpreters.checkify``)
key_reuse_rules  a ``KeyReuseSignature``, or ``rule(eqn) -> KeyReuseSignature``: which key
                 inputs an equation consumes, which outputs are fresh keys or its inputs
                 (``plax.interpreters.key_reuse``)
"""
from __future__ import annotations

from plax.core import dtypes
from plax.core.avals import ShapedArray

# Every primitive ever made, in creation order (the rule-coverage test walks it).
all_primitives: list = []

abstract_eval_rules: dict = {}
impl_rules: dict = {}
jvp_rules: dict = {}
transpose_rules: dict = {}
batch_rules: dict = {}
partial_eval_rules: dict = {}
dce_rules: dict = {}
# prim -> rule for every platform; platform_lowering_rules[prim][platform] overrides it.
lowering_rules: dict = {}
platform_lowering_rules: dict = {}
physical_lowering_rules: dict = {}
collective_axis_names: dict = {}
param_printers: dict = {}
out_sharding_params: dict = {}
replication_rules: dict = {}
# prim -> rule(avals_in, avals_out, **params) -> [sharding or None per result]; a result's
# sharding is a NamedSharding over an AbstractMesh with one entry per dimension.
sharding_rules: dict = {}
# prim -> ``rule(params) -> frozenset of Effect``; the effects of one of its equations.
effect_rules: dict = {}
# prim -> ``rule(avals, params) -> frozenset``: effects read off the input types as well
# (a primitive declared with ``def_effectful_abstract_eval``).
aval_effect_rules: dict = {}
# prim -> ``rule(inner_effects, params) -> frozenset``: what the effects of the jaxprs an
# equation holds are, seen from outside (default: the same). shard_map orders its body's
# ordered effects per device, so outside they are unordered.
nested_effect_rules: dict = {}
# prim -> rule(params) -> context manager under which the jaxprs an equation holds are typed
# (shard_map: its manual mesh axes bound, for the collectives naming them).
body_context_rules: dict = {}
# prim -> rule(params) -> [(held jaxpr, operand position of each of its inputs)].
jaxpr_operand_rules: dict = {}
# prim -> discharge rule (references as values; ``plax.transforms.discharge``).
discharge_rules: dict = {}
# prim -> rule(ctx, *operands, **params): a Pallas kernel equation as Mosaic ops (pallas/mosaic_*).
mosaic_lowering_rules: dict = {}
# prim -> rule(eqn, printer) -> text: the equation's own printed form.
pp_eqn_rules: dict = {}
# Primitives whose equations have an (unnamed) effect: never removed as dead code. Named
# effects (ordered or not) are declared in ``effect_rules``.
effectful_primitives: set = set()
# prim -> rule(trace, args, params) -> outs, run in the parent trace of a CheckifyTrace.
checkify_rules: dict = {}
# prim -> KeyReuseSignature, or rule(eqn) -> KeyReuseSignature: what the key-reuse checker
# takes an equation to do with keys (sinks, sources, forwards).
key_reuse_rules: dict = {}
# prim -> rule(primals, series, **params) -> (primal_out, series_out): Taylor-mode propagation
# of normalized Taylor coefficients (plax.experimental.jet's table, filled there).
jet_rules: dict = {}

# Primitives that are linear in (some of) their inputs: they need a transpose rule.
linear_primitives: set = set()
# Primitives transposed even when every cotangent of their results is zero (others are
# skipped then): a user's backward rule (custom_vjp's) may give nonzero input cotangents
# for zero output ones, as JAX's backward pass calls it.
transposed_on_zero_cotangents: set = set()


def register_lowering(prim, rule, platform: str | None = None):
    """Register ``rule`` as ``prim``'s lowering, for one platform ("cpu", "cuda", ...)
    or, with ``platform=None``, for every platform without a rule of its own."""
    if platform is None:
        lowering_rules[prim] = rule
    else:
        platform_lowering_rules.setdefault(prim, {})[platform] = rule
    return rule


def lowering_rule(prim, platform: str):
    """The lowering rule of ``prim`` on ``platform`` (None when it has none)."""
    per_platform = platform_lowering_rules.get(prim)
    if per_platform is not None:
        rule = per_platform.get(platform)
        if rule is not None:
            return rule
    return lowering_rules.get(prim)


# --- symbolic values -------------------------------------------------------------------
class Zero:
    """A symbolic zero tangent (or cotangent) of type ``aval``: costs nothing to carry."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


class UndefinedPrimal:
    """Marks a linear input of an equation being transposed."""

    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined(x) -> bool:
    return type(x) is UndefinedPrimal


# The batch dimension of a value that does not vary along the vmapped axis.
not_mapped = None


def differentiable(aval: ShapedArray) -> bool:
    """Whether values of ``aval`` have (non-float0) tangents: inexact dtypes, and extended
    dtypes whose rules give a tangent dtype (``primal_tangent_dtype(int8, bfloat16)``)."""
    return dtypes.is_inexact(aval.dtype) or tangent_aval(aval).dtype != dtypes.float0


def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """The tangent type of values of ``aval``: same, or float0 for integers and booleans."""
    if dtypes.is_inexact(aval.dtype):
        return aval
    rules = getattr(aval.dtype, "_rules", None)  # a user's extended dtype says
    if rules is not None:
        return aval.update(dtype=rules.tangent_dtype(aval.dtype), weak_type=False)
    return ShapedArray(aval.shape, dtypes.float0)  # integers, booleans and PRNG keys
