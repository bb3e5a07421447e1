"""``plax.experimental.xla_metadata``: attach metadata for XLA to the ops of a program.

``with set_xla_metadata(name=value, ...):`` (also a decorator): every op staged inside
carries the pairs as ``mhlo.frontend_attributes`` (values as strings; booleans as
``true``/``false``), nested blocks adding to (and overriding) enclosing ones. The pairs are
recorded on the equations staged inside (their ``source_info``) and are part of jit's trace
key, so a jitted function called inside is traced again with them.

``set_xla_metadata(x, name=value, ...)`` tags the ops that computed the arrays of the pytree
``x`` instead, through the identity primitive ``xla_metadata_value_p`` (a gradient passes
through it untagged, as in JAX).
"""
from __future__ import annotations

import functools

from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, register_lowering, transpose_rules
from plax.core.source_info import staged_frontend_attributes, staging_location
from plax.core.tree_core import tree_flatten, tree_unflatten
from plax.first_order import ad_util
from plax.first_order.batch_util import vectorized

__all__ = ["set_xla_metadata"]


def _text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


class _Decorated:
    """A function run inside the metadata block; its callable attributes (a jitted
    function's ``lower``, ...) run inside it too."""

    def __init__(self, fun, block):
        self._fun, self._block = fun, block
        functools.update_wrapper(self, fun)

    def __call__(self, *args, **kwargs):
        with self._block:
            return self._fun(*args, **kwargs)

    def __getattr__(self, name):
        attr = getattr(self._fun, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        def inside(*args, **kwargs):
            with self._block:
                return attr(*args, **kwargs)
        return inside


class XlaMetadataContextManager:
    """``with`` block (or decorator) attaching metadata to the ops staged inside."""

    __slots__ = ("updates", "_open")

    def __init__(self, updates: dict):
        self.updates = {str(k): _text(v) for k, v in updates.items()}
        self._open = []

    def __enter__(self):
        if not self.updates:
            self._open.append(None)
            return
        merged = dict(staging_location.frontend_attributes)
        merged.update(self.updates)
        block = staged_frontend_attributes("xla_metadata_context_manager",
                                           tuple(sorted(merged.items())), self.updates)
        block.__enter__()
        self._open.append(block)

    def __exit__(self, *exc):
        block = self._open.pop()
        return False if block is None else block.__exit__(*exc)

    def __call__(self, fun):
        return _Decorated(fun, self)


def set_xla_metadata(x=None, **kwargs):
    """With ``x``: ``x`` (a pytree of arrays) with the ops that computed its arrays tagged
    with the ``kwargs`` pairs. Without: a context manager (or decorator) tagging every op
    staged inside."""
    if x is None:
        return XlaMetadataContextManager(kwargs)
    pairs = tuple(sorted((str(k), _text(v)) for k, v in kwargs.items()))
    leaves, tree = tree_flatten(x)
    return tree_unflatten(tree, [xla_metadata_value_p.bind(v, xla_metadata_kvs=pairs)
                                 for v in leaves])


# --- xla_metadata_value_p: the identity, tagging the op that made its operand ------------
xla_metadata_value_p = Primitive("xla_metadata_value")


def _lowering(ctx, x, *, xla_metadata_kvs):
    if xla_metadata_kvs:
        ctx.fn.tag_defining_op(x, xla_metadata_kvs)
    return x


abstract_eval_rules[xla_metadata_value_p] = lambda aval, *, xla_metadata_kvs: aval
register_lowering(xla_metadata_value_p, _lowering)
ad_util.deflinear(xla_metadata_value_p)
transpose_rules[xla_metadata_value_p] = lambda ct, x, *, xla_metadata_kvs: [ct]
vectorized(xla_metadata_value_p)
