"""plax.numpy.vectorize: a function on core blocks, mapped over broadcast loop dimensions with vmap."""
from __future__ import annotations

import functools
import re
import warnings

from plax.core.config import config
from plax.core.source_info import user_stacklevel
from plax.core.trace import get_aval

_DIMS = r"\w+"
_CORE = rf"\((?:{_DIMS}(?:,{_DIMS})*)?\)"
_ARGS = rf"{_CORE}(?:,{_CORE})*"
_SIGNATURE = rf"^{_ARGS}->{_ARGS}$"  # (compiled by re on first use, not at import)


def _parse_signature(signature: str):
    """``'(m,n),(n)->(m)'`` -> ``([('m', 'n'), ('n',)], [('m',)])``."""
    compact = re.sub(r"\s+", "", signature)
    if not re.match(_SIGNATURE, compact):
        raise ValueError(f"not a valid gufunc signature: {signature}")
    ins, outs = compact.split("->")
    parse = lambda side: [tuple(re.findall(_DIMS, group)) for group in re.findall(_CORE, side)]  # noqa: E731
    return parse(ins), parse(outs)


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """Vectorize ``pyfunc`` as ``numpy.vectorize`` does, with ``vmap`` doing the looping.

    Without ``signature`` the function sees scalars; with a gufunc ``signature``
    such as ``'(n),(n)->()'`` it sees blocks with those core dimensions and is
    mapped over the broadcast leading (loop) dimensions. Arguments named in
    ``excluded`` (positions or keyword names) are passed through unmapped.
    """
    if any(not isinstance(e, (int, str)) for e in excluded):
        raise TypeError("jax.numpy.vectorize can only exclude integer or string arguments "
                        f"(positions or keyword names), but excluded={excluded!r}")
    if any(isinstance(e, int) and e < 0 for e in excluded):
        raise ValueError(f"excluded={excluded!r} contains negative numbers")
    excluded = frozenset(excluded)
    in_core, out_core = _parse_signature(signature) if signature is not None else (None, None)
    where = f"on vectorized function with excluded={excluded!r} and signature={signature!r}"

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        import plax.numpy as jnp
        not_excluded = [i for i in range(len(args)) if i not in excluded]
        # None arguments pass through unmapped, as excluded ones (their core must be ())
        none_at = {k for k, i in enumerate(not_excluded) if args[i] is None}
        cores = in_core if in_core is not None else [()] * len(not_excluded)
        if none_at:
            if any(k < len(cores) and cores[k] != () for k in none_at):
                raise ValueError(f"Cannot pass None at locations {none_at} with "
                                 f"signature={signature!r}")
            cores = [c for k, c in enumerate(cores) if k not in none_at]
        mapped_pos = [i for k, i in enumerate(not_excluded) if k not in none_at]
        mapped_kw = sorted(k for k in kwargs if k not in excluded)
        values = [jnp.asarray(args[i]) for i in mapped_pos] + [jnp.asarray(kwargs[k])
                                                             for k in mapped_kw]

        def call(*mapped):
            full = list(args)
            for i, v in zip(mapped_pos, mapped):
                full[i] = v
            kw = dict(kwargs)
            kw.update(zip(mapped_kw, mapped[len(mapped_pos):]))
            return pyfunc(*full, **kw)

        if in_core is None:
            cores = [()] * len(values)
        if len(cores) != len(values):
            raise TypeError(f"wrong number of positional arguments: expected {len(cores)}, got "
                            f"{len(values)} {where}")
        sizes: dict = {}
        loop_shapes = []
        for v, core in zip(values, cores):
            shape = get_aval(v).shape
            if len(shape) < len(core):
                raise ValueError(f"input with shape {shape} does not have enough dimensions for "
                                 f"all core dimensions {core} {where}")
            for name, size in zip(core, shape[len(shape) - len(core):]):
                if sizes.setdefault(name, size) != size:
                    raise ValueError(f"inconsistent size for core dimension {name!r}: {size} vs "
                                     f"{sizes[name]} {where}")
            loop_shapes.append(shape[:len(shape) - len(core)])
        check_loop_rank_promotion([get_aval(v).shape for v in values], loop_shapes, signature)
        loop = jnp.broadcast_shapes(*loop_shapes) if loop_shapes else ()
        values = [jnp.broadcast_to(v, tuple(loop) + get_aval(v).shape[len(s):])
                  for v, s in zip(values, loop_shapes)]

        def checked(*mapped):
            out = call(*mapped)
            if out_core is not None:
                if len(out_core) > 1 and not isinstance(out, tuple):
                    raise TypeError("output must be a tuple when multiple outputs are "
                                    f"expected, got: {out!r}\n{where}")
                outs = out if isinstance(out, tuple) else (out,)
                if len(outs) != len(out_core):
                    raise TypeError(f"wrong number of output arguments: expected "
                                    f"{len(out_core)}, got {len(outs)} {where}")
                seen = dict(sizes)
                for o, core in zip(outs, out_core):
                    shape = get_aval(o).shape
                    if len(shape) != len(core):
                        raise ValueError(f"output shape {shape} does not match core dimensions "
                                         f"{core} {where}")
                    for name, size in zip(core, shape):
                        if seen.setdefault(name, size) != size:
                            raise ValueError(f"inconsistent size for core dimension {name!r}: "
                                             f"{size} vs {seen[name]} {where}")
            return out

        from plax.api.vmap import vmap
        f = checked
        for _ in loop:
            f = vmap(f)
        return f(*values)

    return wrapped


def check_loop_rank_promotion(shapes, loop_shapes, signature) -> None:
    """jax_numpy_rank_promotion for the loop dimensions of non-scalar operands of a gufunc
    with ``signature``, as JAX's vectorize checks it."""
    mode = config.read("numpy_rank_promotion")
    ranks = {len(loop) for shape, loop in zip(shapes, loop_shapes) if shape}
    if mode == "allow" or len(ranks) <= 1:
        return
    msg = (f"operands with shapes {shapes} require rank promotion for jnp.vectorize function "
           f"with signature {signature}. Set the jax_numpy_rank_promotion config option to "
           "'allow' to disable this message, or add the missing loop dimensions explicitly.")
    if mode == "raise":
        raise ValueError(msg)
    warnings.warn(msg, stacklevel=user_stacklevel())


__all__ = ["vectorize"]
