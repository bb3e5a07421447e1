"""Which mesh axes a value inside shard_map varies over (its ``vma``, in its type).

Inside ``shard_map`` every device holds its own block of a value; a value *varies*
over a manual mesh axis when devices along that axis may hold different blocks, and
is *invariant* over it when they hold the same. With ``check_vma`` the body is traced
with the varying axes in the types (``f32[4]{V:x}``, the ``varying`` set of the aval's
``manual_axis_type``):

- after a primitive's abstract evaluation, ``propagate`` sets its results' varying
  axes with its rule (``replication_rules[prim](ins, **params) -> [frozenset]``,
  registered beside the primitive: collectives, control flow); a primitive without
  one varies over everything its operands do (a higher-order one keeps its body's
  types);
- before such a primitive binds, ``coerce`` marks its less varying operands varying
  with ``pvary`` (the implicit pvary), so that every change of replication is an
  equation. ``pvary`` and ``psum_invariant`` transpose into each other: this is what
  makes gradients of shard_map exact, with no needless collectives.

An output whose out spec does not split it over an axis it varies over is refused.
"""
from __future__ import annotations

import contextlib

from plax.core.avals import ManualAxisType
from plax.core.config import config
from plax.core.caches import BoundedCache
from plax.core.rules import replication_rules

__all__ = ["vma_in_types", "checking", "manual_axes", "propagate", "coerce", "union",
           "varying_type", "vma", "vary_like"]

# How many shard_map bodies checked for replication are being traced (or transformed) now.
vma_in_types = [0]
_manual: list = []  # their manual axes, innermost last
_orders: list = []  # their meshes' axis orders (how types print the axes), innermost last
# The pvary primitive (registered by plax.first_order.collectives, which core cannot import).
pvary_prim = [None]


def union(sets) -> frozenset:
    out = frozenset()
    for s in sets:
        out |= s
    return out


@contextlib.contextmanager
def checking(manual, order=()):
    """Trace with the varying axes in the types, inside a shard_map over ``manual`` (a mesh
    whose axes are ``order``)."""
    vma_in_types[0] += 1
    _manual.append(frozenset(manual))
    _orders.append(tuple(order))
    try:
        yield
    finally:
        _orders.pop()
        _manual.pop()
        vma_in_types[0] -= 1


_types = BoundedCache("manual axis types")


def varying_type(varying, order=None) -> ManualAxisType:
    """The manual axis type of a value varying over ``varying`` (printed in the axis order of
    the innermost shard_map's mesh unless ``order`` is given)."""
    if order is None:
        order = _orders[-1] if _orders else ()
    key = (frozenset(varying), order)
    t = _types.get(key)
    if t is None:
        t = _types.put(key, ManualAxisType(varying=key[0], _order=order))
    return t


def vma(aval) -> frozenset:
    """The mesh axes ``aval`` varies over (none for values outside shard_map)."""
    mat = getattr(aval, "manual_axis_type", None)
    return frozenset() if mat is None else mat.varying


def manual_axes() -> frozenset:
    """The manual axes of the innermost checked shard_map being traced (empty outside)."""
    return _manual[-1] if _manual else frozenset()


def _has_body(params) -> bool:
    from plax.core.jaxpr import subjaxprs  # (jaxpr.py imports primitive.py, which imports this)
    return any(True for _ in subjaxprs(params))


def propagate(prim, avals, outs, params) -> list:
    """``outs`` (the results' avals) with the axes they vary over."""
    ins = [vma(a) for a in avals]
    rule = replication_rules.get(prim)
    if rule is None:
        if _has_body(params):
            return outs  # a call, loop or branch: its body's types
        sets = [union(ins)] * len(outs)
    else:
        sets = rule(ins, **params)
    return [o if vma(o) == s or not hasattr(o, "manual_axis_type") else
            o.update(manual_axis_type=varying_type(s)) for o, s in zip(outs, sets)]


def coerce(prim, args, params):
    """``args`` with the less varying operands of a standard primitive pvary'd up to the
    most varying one's axes (constants, the same on every device, stay as they are)."""
    if prim in replication_rules or _has_body(params):
        return args
    sets = [vma(getattr(a, "aval", None)) for a in args]
    target = union(sets)
    if all(s == target for s in sets):
        return args
    if not config.read("auto_pcast"):  # (plax.auto_pcast(False): no implicit pvary)
        raise ValueError(f"Primitive {prim} requires varying manual axes to match, but got "
                         f"{sets}. pvary the less varying operands explicitly, or pass "
                         "check_vma=False to shard_map.")
    out = []
    for a, s in zip(args, sets):
        if s != target and hasattr(a, "aval") and not _is_constant(a):
            a = pvary_prim[0].bind(a, axes=tuple(sorted(target - s)))[0]
        out.append(a)
    return out


def vary_like(value, like):
    """Inside a shard_map checked for replication: ``value`` pvary'd over the axes ``like``
    varies over and it does not (what JAX's ``full_like`` does: a value made like a varying
    one varies as it does); ``value`` itself elsewhere."""
    if not vma_in_types[0]:
        return value
    from plax.core.trace import get_aval
    missing = vma(get_aval(like)) - vma(get_aval(value))
    if not missing:
        return value
    order = _orders[-1] if _orders else ()
    axes = tuple(sorted(missing, key=lambda n: (order.index(n) if n in order else len(order), n)))
    return pvary_prim[0].bind(value, axes=axes)[0]


def _is_constant(x) -> bool:
    from plax.core.trace import Tracer
    return not isinstance(x, Tracer)
