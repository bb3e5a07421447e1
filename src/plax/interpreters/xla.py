"""``plax.interpreters.xla``: JAX's hooks on values and eager primitives, as
``jax.interpreters.xla``.

``canonicalize_dtype_handlers[t](x)`` turns a value of type ``t`` into a NumPy value of the
canonical dtype before plax puts it on a device; a library registers its own value types
there (and their types in ``plax.core.pytype_aval_mappings``). ``apply_primitive`` runs a
primitive eagerly; ``Backend`` is the type of the XLA clients plax runs on.
"""
from plax.core.avals import canonicalize_dtype_handlers  # noqa: F401
from plax.core.trace import EvalTrace as _EvalTrace
from plax.runtime.xla import Client as Backend  # noqa: F401


def apply_primitive(prim, *args, **params):
    """``prim`` applied to concrete ``args`` now (compiled, as plax runs every eager op)."""
    return _EvalTrace().process_primitive(prim, args, params)
