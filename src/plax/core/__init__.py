"""plax's core: dtypes, config, avals, primitives, traces and the jaxpr IR.

As a package it also offers the public names of ``jax.core`` (``ShapedArray``,
``Tracer``, ``Jaxpr``, ``eval_jaxpr``, ...), loaded on first use so that
importing the core's own modules stays cheap and free of cycles.
"""
from typing import Any as _Any

# public name -> (module under plax, attribute there)
_PUBLIC = {
    "AbstractValue": ("plax.core.avals", "AbstractValue"),
    "ShapedArray": ("plax.core.avals", "ShapedArray"),
    "Trace": ("plax.core.trace", "Trace"),
    "Tracer": ("plax.core.trace", "Tracer"),
    "get_aval": ("plax.core.trace", "get_aval"),
    "concrete_or_error": ("plax.core.trace", "concrete_or_error"),
    "Primitive": ("plax.core.primitive", "Primitive"),
    "Jaxpr": ("plax.core.jaxpr", "Jaxpr"),
    "ClosedJaxpr": ("plax.core.jaxpr", "ClosedJaxpr"),
    "JaxprEqn": ("plax.core.jaxpr", "JaxprEqn"),
    "Var": ("plax.core.jaxpr", "Var"),
    "Literal": ("plax.core.jaxpr", "Literal"),
    "eval_jaxpr": ("plax.core.jaxpr", "eval_jaxpr"),
    "ensure_compile_time_eval": ("plax.api.jit", "ensure_compile_time_eval"),
    "eval_context": ("plax.api.jit", "eval_context"),
    "typeof": ("plax.api.jit", "typeof"),
    "pytype_aval_mappings": ("plax.core.avals", "pytype_aval_mappings"),
    # Names JAX 0.10 still offers in jax.core (moved to jax.extend.core there).
    "DropVar": ("plax.extend.core", "DropVar"),
    "find_top_trace": ("plax.extend.core", "find_top_trace"),
    "get_opaque_trace_state": ("plax.extend.core", "get_opaque_trace_state"),
    "jaxprs_in_params": ("plax.extend.core", "jaxprs_in_params"),
    "valid_jaxtype": ("plax.extend.core", "valid_jaxtype"),
}

Value = _Any
ParamDict = dict


def max_dim(d1, d2):
    """The larger of two dimension sizes (symbolic ``max(d1, d2)`` when undecided)."""
    from plax.core.symbolic_shapes import max_dim
    return max_dim(d1, d2)


def min_dim(d1, d2):
    """The smaller of two dimension sizes (symbolic ``min(d1, d2)`` when undecided)."""
    from plax.core.symbolic_shapes import min_dim
    return min_dim(d1, d2)


def __getattr__(name):
    if name == "Atom":
        from plax.core.jaxpr import Literal, Var
        return Var | Literal
    try:
        module, attr = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'plax.core' has no attribute {name!r}") from None
    import importlib
    return getattr(importlib.import_module(module), attr)


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC) | {"Atom"})
