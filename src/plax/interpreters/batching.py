"""``plax.interpreters.batching``: vmap rules, as ``jax.interpreters.batching``.

``fancy_primitive_batchers`` *is* plax's batch-rule table (``plax.core.rules``), whose
convention is JAX's: ``rule(axis_data, vals, dims, **params) -> (out, out_dim)``, where
``axis_data`` has the vmap's ``size`` and ``name`` and a dimension of ``not_mapped`` (None)
marks a value that does not vary. ``primitive_batchers[p] = rule(vals, dims, **params)`` and
``axis_primitive_batchers[p] = rule(axis_size, axis_name, trace_type, vals, dims, **params)``
are JAX's older conventions, stored in that table wrapped.

``register_vmappable`` makes a container type one that ``vmap`` maps over as a whole (its
``in_axes``/``out_axes`` entries are the container's own spec type); ``plax.api.vmappables``
is how vmap uses the handlers registered here.
"""
from __future__ import annotations

from plax.core.rules import batch_rules as fancy_primitive_batchers, not_mapped  # noqa: F401

from plax.first_order.batch_util import bdim_at_front, move_batch_dim as _move_batch_dim  # noqa: F401
from plax.first_order.batch_util import broadcasting as _broadcasting


def _unbatched(prim, vals, params):
    out = prim.bind(*vals, **params)
    return (out, [not_mapped] * len(out)) if prim.multiple_results else (out, not_mapped)


class _OlderBatchers:
    """A write-mostly view of the batch-rule table for one of JAX's older conventions."""

    def __init__(self, wrap):
        self._wrap = wrap

    def __setitem__(self, prim, rule):
        fancy_primitive_batchers[prim] = self._wrap(prim, rule)

    def __delitem__(self, prim):
        del fancy_primitive_batchers[prim]

    def __contains__(self, prim):
        return prim in fancy_primitive_batchers


def _plain(prim, rule):
    def batched(axis_data, vals, dims, **params):
        if all(d is not_mapped for d in dims):
            return _unbatched(prim, vals, params)
        return rule(vals, dims, **params)
    return batched


def _with_axis(prim, rule):
    def batched(axis_data, vals, dims, **params):
        return rule(axis_data.size, axis_data.name, None, vals, dims, **params)
    return batched


primitive_batchers = _OlderBatchers(_plain)
axis_primitive_batchers = _OlderBatchers(_with_axis)


def broadcast(x, sz: int, axis: int, mesh_axis=None):
    """``x`` given a new dimension of size ``sz`` at ``axis`` (its values repeated)."""
    del mesh_axis
    return _move_batch_dim(x, not_mapped, axis, sz)


def defvectorized(prim):
    """Batch ``prim`` by applying it to the batched values as they are: it acts on each
    element independently, so the batch dimension stays where it is (operands batched at
    different dimensions are first moved to the front)."""
    def rule(axis_data, vals, dims, **params):
        if all(d is not_mapped for d in dims):
            return _unbatched(prim, vals, params)
        mapped = {d for d in dims if d is not not_mapped}
        if len(mapped) > 1 or len(mapped) != len(dims):
            vals = [bdim_at_front(v, d, axis_data.size) for v, d in zip(vals, dims)]
            dims = [0] * len(vals)
        return prim.bind(*vals, **params), next(d for d in dims if d is not not_mapped)
    fancy_primitive_batchers[prim] = rule


def defbroadcasting(prim):
    """Batch an elementwise ``prim`` whose operands broadcast as lax's do (rank 0 or equal
    shapes)."""
    _broadcasting(prim)


def defreducer(prim):
    """Batch a reduction ``prim`` with an ``axes`` parameter: the batch dimension goes to
    the front and the reduced axes shift past it."""
    def rule(axis_data, vals, dims, *, axes, **params):
        if all(d is not_mapped for d in dims):
            return _unbatched(prim, vals, dict(params, axes=axes))
        vals = [bdim_at_front(v, d, axis_data.size) for v, d in zip(vals, dims)]
        out = prim.bind(*vals, axes=tuple(a + 1 for a in axes), **params)
        return (out, [0] * len(out)) if prim.multiple_results else (out, 0)
    fancy_primitive_batchers[prim] = rule


# --- containers vmap maps over as a whole (JAX's vmappable types) ---------------------------
vmappables: dict = {}  # data type -> (spec type, axis-size type)
spec_types: set = set()  # types allowed as in_axes/out_axes entries besides int and None
to_elt_handlers: dict = {}  # data type -> to_elt(cont, get_idx, x, spec) -> per-example value
from_elt_handlers: dict = {}  # data type -> from_elt(cont, axis_size, elt, spec) -> container
make_iota_handlers: dict = {}  # axis-size type -> make_iota(axis_size) -> index array


def register_vmappable(data_type: type, spec_type: type, axis_size_type: type,
                       to_elt, from_elt, make_iota=None) -> None:
    """Let ``vmap`` map over values of ``data_type`` as a whole, with ``spec_type`` values
    as their ``in_axes``/``out_axes`` entries.

    ``to_elt(cont, get_idx, x, spec)`` gives the per-example value of ``x``, calling
    ``cont(array, axis)`` for each array inside it mapped along ``axis`` (an int or None);
    ``get_idx()`` is the example's index. ``from_elt(cont, axis_size, elt, spec)`` rebuilds
    a batched container from a per-example one, calling ``cont(axis_size, array, axis)`` to
    get each array inside with its batch dimension at ``axis``. ``make_iota(axis_size)``
    makes the index array for axis sizes of ``axis_size_type``.
    """
    vmappables[data_type] = (spec_type, axis_size_type)
    spec_types.add(spec_type)
    to_elt_handlers[data_type] = to_elt
    from_elt_handlers[data_type] = from_elt
    if make_iota is not None:
        make_iota_handlers[axis_size_type] = make_iota


def unregister_vmappable(data_type: type) -> None:
    """Stop mapping over ``data_type`` as a whole (its spec type stays accepted while
    another registered type uses it)."""
    spec_type, axis_size_type = vmappables.pop(data_type)
    to_elt_handlers.pop(data_type, None)
    from_elt_handlers.pop(data_type, None)
    if all(s is not spec_type for s, _ in vmappables.values()):
        spec_types.discard(spec_type)
    if all(a is not axis_size_type for _, a in vmappables.values()):
        make_iota_handlers.pop(axis_size_type, None)


def is_vmappable(x) -> bool:
    """Whether ``x`` is of a type registered with ``register_vmappable``."""
    return type(x) in vmappables

