"""``jax._src.api_util``: as ``jax.api_util`` (``plax.api_util``: flattening wrapped
functions, debug info, donation), with ``infer_argnums_and_argnames`` (how a transformation
fills in the argnames of given argnums, and the other way round, from a function's
signature) and ``resolve_kwargs``."""
import inspect

from plax import api_util as _public

from plax._src import _face

_REFUSED = {
    "flatten_axis_resources": "plax checks jit's shardings against the arguments' tree in "
                              "jit itself (plax.api.jit_options)",
    "save_wrapped_fun_debug_info": "plax's debug info is read off the function itself "
                                   "(plax.core.debug_info); it keeps none saved on wrappers",
}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _public)

_POSITIONAL_OR_KEYWORD = inspect.Parameter.POSITIONAL_OR_KEYWORD


def _as_tuple(x, kind) -> tuple:
    return (x,) if isinstance(x, kind) else tuple(x)


def infer_argnums_and_argnames(sig: inspect.Signature, argnums, argnames) -> tuple:
    """``(argnums, argnames)`` with whichever is None filled in from ``sig``: the parameters
    that may be passed either way; both given are returned as tuples, unchecked."""
    if argnums is None and argnames is None:
        return (), ()
    if argnums is not None and argnames is not None:
        return _as_tuple(argnums, int), _as_tuple(argnames, str)
    params = list(sig.parameters.items())
    if argnums is None:
        argnames = _as_tuple(argnames, str)
        argnums = tuple(i for i, (name, p) in enumerate(params)
                        if p.kind == _POSITIONAL_OR_KEYWORD and name in argnames)
    else:
        argnums = _as_tuple(argnums, int)
        argnames = tuple(name for i, (name, p) in enumerate(params)
                         if p.kind == _POSITIONAL_OR_KEYWORD and i in argnums)
    return argnums, argnames


def resolve_kwargs(fun, args, kwargs) -> tuple:
    """``args`` with ``kwargs`` (and the defaults) put in their positions in ``fun``'s
    signature; a keyword argument given that has no position raises TypeError (keyword-only
    parameters left to their defaults are not part of the result)."""
    bound = inspect.signature(fun).bind(*args, **kwargs)
    bound.apply_defaults()
    left = [k for k in bound.kwargs if k in kwargs]
    if left:
        raise TypeError("The following keyword arguments could not be resolved to positions: "
                        + ", ".join(left))
    return bound.args
