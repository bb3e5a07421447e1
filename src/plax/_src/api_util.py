"""``jax._src.api_util``: ``infer_argnums_and_argnames``, how a transformation fills in the
argnames of given argnums (and the other way round) from a function's signature."""
import inspect

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
