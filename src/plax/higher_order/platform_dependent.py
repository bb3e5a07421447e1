"""``lax.platform_dependent``: code chosen by the platform a computation is compiled for.

``platform_index_p`` is the index of the branch for the platform: its lowering is a
constant, written when the platform is known (lowering time), and evaluated eagerly it
runs as a one-equation program on the default device. Eagerly the branch is then called
directly; traced, the branches become a ``switch`` on that index whose ``cond`` equation
keeps ``branches_platforms`` (as JAX's), so they are differentiated and batched as
``switch``'s are, and lowering emits only the branch of the platform being compiled for (a
branch other platforms cannot lower, such as a CUDA-only custom call, is never lowered).
"""
from __future__ import annotations

import numpy as np

from plax.core.avals import ShapedArray
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, not_mapped, register_lowering
from plax.core.trace import Tracer
from plax.first_order.ad_util import defzero
from plax.higher_order.cond import platform_branch, platform_switch
from plax.lowering.stablehlo import dense_elements

__all__ = ["platform_dependent"]

platform_index_p = Primitive("platform_index")
_INDEX_AVAL = ShapedArray((), np.dtype(np.int32))


def platform_dependent(*args, default=None, **per_platform):
    """``per_platform[platform](*args)`` for the platform the computation runs on
    (``cpu``, ``cuda``, ``rocm``, ``tpu``), or ``default(*args)`` for any other; every
    branch is traced (they must agree in output types), the choice is made when the
    platform is known."""
    groups: list = []  # [(platform names, branch)], one per distinct branch
    for name, branch in per_platform.items():
        if not callable(branch):
            raise TypeError(f"lax.platform_dependent: the '{name}' branch must be a callable.")
        if name == "gpu":
            raise ValueError("Use 'cuda' or 'rocm' for lax.platform_dependent.")
        for names, b in groups:
            if b is branch:
                names.append(name)
                break
        else:
            groups.append(([name], branch))
    platforms = tuple(tuple(names) for names, _ in groups)
    branches = [b for _, b in groups]
    if default is not None:
        if not callable(default):
            raise TypeError("lax.platform_dependent: the 'default' branch must be a callable.")
        branches.append(default)
        platforms += (None,)
    index = platform_index_p.bind(platforms=platforms)
    if not isinstance(index, Tracer):
        return branches[int(index)](*args)
    # (One branch is still a cond on the index, so that lowering for a platform it is not
    # for fails as it should, instead of collapsing to the branch.)
    return platform_switch(index, branches, platforms, *args)


def _lowering(ctx, *, platforms):
    i = platform_branch(ctx.module_context.platform, platforms)
    return ctx.op1("stablehlo.constant", [], [], _INDEX_AVAL,
                    props=f"value = {dense_elements(np.int32(i), _INDEX_AVAL)}")


def _batch(axis, vals, dims, *, platforms):
    return platform_index_p.bind(platforms=platforms), not_mapped


abstract_eval_rules[platform_index_p] = lambda *, platforms: _INDEX_AVAL
register_lowering(platform_index_p, _lowering)
defzero(platform_index_p)  # the index carries no tangent
batch_rules[platform_index_p] = _batch
