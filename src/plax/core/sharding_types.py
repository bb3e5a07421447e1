"""Sharding in types: how primitives carry the Explicit-axis shardings of their operands.

On a mesh with ``AxisType.Explicit`` axes an aval knows how it is split (``f32[8@x,4]``;
see ``ShapedArray._sharding``). After a primitive's abstract evaluation has found the
result shapes, its *sharding rule* (``sharding_rules[prim]``) finds the results'
shardings from the operands' and the parameters (``out_sharding=``/``sharding=``),
or raises ``ShardingTypeError`` when the answer is ambiguous, as JAX does.

A primitive without a rule gets the default: when every result has the shape of every
operand that is not a scalar it is elementwise (operands must agree); otherwise its
results keep what the abstract rule gave them (higher-order primitives: the types of
their bodies' results; new avals: replicated).

This module is below ``plax.sharding``: it reads shardings (``.mesh``, ``.spec``) and
builds new ones with ``type(s)(mesh, entries)``, never importing them.
"""
from __future__ import annotations

from plax.core import avals as _avals
from plax.core.rules import sharding_rules


class ShardingTypeError(Exception):
    """The shardings of a primitive's operands do not determine its result's (JAX's
    ``ShardingTypeError``): reshard an operand, or pass ``out_sharding=``."""


class _Illegal(Exception):
    """A rule produced a spec naming one mesh axis for two dimensions (``propagate`` turns
    it into JAX's error, naming the primitive)."""

    def __init__(self, template, entries):
        self.template, self.entries = template, entries


def spec_of(aval) -> tuple:
    """``aval``'s sharding as one entry per dimension (all None when it carries none)."""
    s = getattr(aval, "_sharding", None)
    return (None,) * len(aval.shape) if s is None else tuple(s.spec)


def axes_of(entry) -> tuple:
    """The mesh axes of one spec entry (``None``, a name, or a tuple of names)."""
    if entry is None:
        return ()
    return entry if isinstance(entry, tuple) else (entry,)


def mesh_of(avals):
    """The AbstractMesh the sharded ones of ``avals`` are on (JAX's error when they differ)."""
    mesh = None
    for a in avals:
        s = getattr(a, "_sharding", None)
        if s is None:
            continue
        if mesh is None:
            mesh = s.mesh
        elif s.mesh != mesh:
            raise ValueError(f"Mesh for all inputs should be equal. Got one mesh {mesh} and "
                             f"another {s.mesh}: reshard the operands onto one mesh first.")
    return mesh


def like(template, entries):
    """A type sharding with ``entries`` on the mesh of ``template`` (a sharding), or None
    when no entry names an axis."""
    entries = tuple(e[0] if isinstance(e, tuple) and len(e) == 1 else e or None
                    for e in entries)
    if template is None or all(e is None for e in entries):
        return None
    if template.spec == entries and len(template.spec) == len(entries):
        return template
    named = [a for e in entries for a in axes_of(e)]
    if len(set(named)) != len(named):
        raise _Illegal(template, entries)
    return type(template)(template.mesh, entries)


def first_sharding(avals):
    mesh_of(avals)
    return next((a._sharding for a in avals if getattr(a, "_sharding", None) is not None), None)


def elementwise(name: str, avals_in, out_shape) -> tuple:
    """The common spec of elementwise operands (rank-0 and size-1 dimensions broadcast):
    JAX's error when two operands split one dimension differently."""
    entries = [None] * len(out_shape)
    for a in avals_in:
        if getattr(a, "_sharding", None) is None or len(a.shape) != len(out_shape):
            continue
        for d, e in enumerate(a._sharding.spec):
            if e is None or a.shape[d] != out_shape[d]:
                continue
            if entries[d] is None:
                entries[d] = e
            elif entries[d] != e:
                specs = ", ".join(str(spec_of(b)) for b in avals_in if len(b.shape))
                raise ShardingTypeError(
                    f"{name} got incompatible shardings for broadcasting: {specs}. Reshard one "
                    "operand (plax.sharding.reshard) so that both split each dimension alike.")
    return tuple(entries)


def _illegal_error(name: str, avals_in, aval_out, entries) -> ShardingTypeError:
    """JAX's error for a result that would split two dimensions over one mesh axis."""
    dims = ",".join(str(d) if e is None else f"{d}@{e}" if isinstance(e, str) else
                    f"{d}@({','.join(e)})" for d, e in zip(aval_out.shape, entries))
    ins = ", ".join(a.str_short() for a in avals_in)
    return ShardingTypeError(
        f"{name} operation with inputs: {ins} produces an illegally sharded result: "
        f"{_avals.short_dtype_name(aval_out.dtype)}[{dims}] (one mesh axis would split two "
        "dimensions). Reshard an operand or pass out_sharding=.")


def elementwise_sharding(name: str, avals_in, out_shape):
    """The type sharding of an elementwise result (see ``elementwise``)."""
    return like(first_sharding(avals_in), elementwise(name, avals_in, out_shape))


def check_legal(name: str, aval_out, sharding) -> None:
    """Every split dimension of the result must divide by its axes' sizes (XLA cannot lay
    out anything else)."""
    mesh_shape = sharding.mesh.shape
    for d, (size, e) in enumerate(zip(aval_out.shape, sharding.spec)):
        parts = 1
        for ax in axes_of(e):
            parts *= mesh_shape[ax]
        if size % parts:
            raise ShardingTypeError(
                f"{name} would give a result of shape {aval_out.shape} whose dimension {d} "
                f"(size {size}) is split over mesh axes {axes_of(e)} ({parts} parts), which "
                "do not divide it. Reshard the operand (plax.sharding.reshard) so that "
                "dimension is not split, or pass out_sharding=.")


def _has_body(params) -> bool:
    from plax.core.jaxpr import ClosedJaxpr, Jaxpr
    for v in params.values():
        if isinstance(v, (Jaxpr, ClosedJaxpr)) or (
                isinstance(v, tuple) and v and isinstance(v[0], (Jaxpr, ClosedJaxpr))):
            return True
    return False


def _default_rule(prim, avals_in, avals_out, params):
    outs = {tuple(o.shape) for o in avals_out}
    if len(outs) != 1 or _has_body(params):
        return None
    (out,) = outs
    ranked = [a.shape for a in avals_in if getattr(a, "shape", ()) != ()]
    # Elementwise: every operand that is not a scalar has the result's shape, up to size-1
    # dimensions (broadcast).
    if ranked and all(len(s) == len(out) and all(d == o or d == 1 for d, o in zip(s, out))
                      for s in ranked):
        return [elementwise_sharding(prim.name, avals_in, out)] * len(avals_out)
    return None


def propagate(prim, avals_in, avals_out, params) -> list:
    """``avals_out`` with the shardings ``prim``'s rule gives them."""
    if not any(getattr(a, "_sharding", None) is not None for a in avals_in) and \
            params.get("out_sharding") is None and params.get("sharding") is None:
        return avals_out
    rule = sharding_rules.get(prim)
    try:
        if rule is None:
            shardings = _default_rule(prim, avals_in, avals_out, params)
            if shardings is None:  # what the abstract rule gave
                shardings = [getattr(o, "_sharding", None) for o in avals_out]
        else:
            shardings = rule(avals_in, avals_out, **params)
    except _Illegal as e:
        raise _illegal_error(prim.name, avals_in, avals_out[0], e.entries) from None
    out = []
    for o, s in zip(avals_out, shardings):
        if s is not None:
            check_legal(prim.name, o, s)
        if getattr(o, "_sharding", None) is not s and isinstance(o, _avals.ShapedArray):
            o = o.update(sharding=s)
        out.append(o)
    return out


# --- types with a dimension added or removed (vmap's batch dimension) ---------------------------
def without_dim(aval, d: int):
    """``aval`` without dimension ``d`` (and its entry in the sharding)."""
    s = aval._sharding
    shape = aval.shape[:d] + aval.shape[d + 1:]
    if s is None:
        return aval.update(shape=shape)
    return aval.update(shape=shape, sharding=like(s, s.spec[:d] + s.spec[d + 1:]))


def with_dim(aval, d: int, size: int, entry=None):
    """``aval`` with a dimension of ``size`` inserted at ``d`` (split as ``entry``)."""
    s = aval._sharding
    shape = aval.shape[:d] + (size,) + aval.shape[d:]
    if s is None and entry is None:
        return aval.update(shape=shape)
    spec = (None,) * len(aval.shape) if s is None else tuple(s.spec)
    return aval.update(shape=shape, sharding=like(s, spec[:d] + (entry,) + spec[d:]))


def with_entry(sharding, d: int, entry=None):
    """A type-sharding parameter with an entry for a new dimension ``d`` (batching a
    primitive that has ``out_sharding=``); None stays None."""
    if sharding is None:
        return None
    spec = tuple(sharding.spec)
    return type(sharding)(sharding.mesh, spec[:d] + (entry,) + spec[d:])


# --- rules shared by families of primitives ------------------------------------------------------
def _given(out_sharding, n: int):
    return [like(out_sharding, out_sharding.spec)] * n


def reduction_rule(avals_in, avals_out, *, axes, out_sharding=None, **_):
    """Reductions: the reduced dimensions leave the spec."""
    if out_sharding is not None:
        return _given(out_sharding, len(avals_out))
    kept = [e for d, e in enumerate(spec_of(avals_in[0])) if d not in axes]
    return [like(first_sharding(avals_in), kept)] * len(avals_out)


def unsplit_dimension(message: str, aval, dim: int) -> None:
    """Raise ``message`` (formatted with ``type`` and ``dim``) when ``aval`` splits ``dim``."""
    if spec_of(aval)[dim] is not None:
        raise ShardingTypeError(message.format(type=aval.str_short(short_dtypes=False),
                                               sharding=aval.sharding, dim=dim))


def same_as_operand(avals_in, avals_out, **_):
    """The results are split as the first operand."""
    return [avals_in[0]._sharding] * len(avals_out)


def given_or_replicated(avals_in, avals_out, *, sharding=None, **_):
    """Creation primitives (iota, ...): the ``sharding=`` parameter, else replicated."""
    return [None] * len(avals_out) if sharding is None else _given(sharding, len(avals_out))
