"""psend and precv: one-sided sends and receives between the devices along mesh axes inside
shard_map (XLA's Send and Recv; NCCL's on GPUs).

``psend(x, axis_name, perm)`` sends each device's ``x`` to the device ``perm`` pairs it
with and returns a token; ``precv(token, out_shape, axis_name, perm)`` receives, after
``token``, what the matching send sent. Both carry the one-sided-communication effect, so
they are never dropped as dead code. As in JAX, they are implemented on GPUs only: lowered
for another platform they raise NotImplementedError.
"""
from __future__ import annotations

from plax import tree_util
from plax.core.avals import ShapedArray
from plax.core.effects import Effect
from plax.core.primitive import Primitive
from plax.core.rules import (abstract_eval_rules, collective_axis_names, effect_rules,
                             register_lowering, replication_rules)
from plax.first_order.collectives import (_as_names, _axis_names_param, _check_bound,
                                          _manual_names, _varying_over, checked_perm,
                                          replica_groups)
from plax.first_order.tokens import Token, create_token_p
from plax.lowering.stablehlo import abstract_token

__all__ = ["psend", "precv"]

psend_p = Primitive("psend")
precv_p = Primitive("precv")


class SingleSideCollectiveEffect(Effect):
    """A send or receive whose partner is in another device's program."""


single_side_collective_effect = SingleSideCollectiveEffect("one-sided communication")


def psend(x, axis_name, perm):
    """Send ``x`` (each leaf of a pytree) from member ``src`` to member ``dst`` of the named
    axis for each ``(src, dst)`` in ``perm``; returns a token (one per leaf) for ``precv`` to
    follow. GPUs only."""
    names = _as_names(axis_name)
    perm = checked_perm("psend", names, perm)
    return tree_util.tree_map(
        lambda leaf: Token(psend_p.bind(_varying_over(leaf, names), axis_name=names,
                                        perm=perm)), x)


def precv(token, out_shape, axis_name, perm):
    """Receive an array of ``out_shape`` (a ShapeDtypeStruct) from the sender ``perm`` pairs
    this member with, after ``token`` (from ``psend`` or ``lax.create_token``). GPUs only."""
    names = _as_names(axis_name)
    perm = checked_perm("precv", names, perm)
    if not isinstance(token, Token):
        raise TypeError(f"precv takes a token (from psend or lax.create_token), got "
                        f"{type(token).__name__}.")
    value = token._value if token._value is not None else create_token_p.bind()
    return precv_p.bind(value, out_shape=ShapedArray(tuple(out_shape.shape), out_shape.dtype),
                        axis_name=names, perm=perm)


def _psend_abstract(x, *, axis_name, perm):
    _check_bound(axis_name)
    return abstract_token


def _precv_abstract(token, *, out_shape, axis_name, perm):
    _check_bound(axis_name)
    return out_shape


def _pairs(ctx, prim, axis_name, perm) -> str:
    groups = replica_groups(ctx, _manual_names(ctx, prim, axis_name))
    pairs = [(int(g[s]), int(g[d])) for g in groups for s, d in perm]
    text = ", ".join(f"[{s}, {d}]" for s, d in pairs)
    # Each send meets its receive by channel: one channel for all of them, as JAX's.
    return (f"channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, "
            f"source_target_pairs = dense<[{text}]> : tensor<{len(pairs)}x2xi64>")


def _psend_gpu(ctx, x, *, axis_name, perm):
    token = ctx.op1("stablehlo.create_token", [], [], abstract_token)
    return ctx.op1("stablehlo.send", [x, token], [ctx.avals_in[0], abstract_token],
                   abstract_token, props=_pairs(ctx, "psend", axis_name, perm))


def _precv_gpu(ctx, token, *, out_shape, axis_name, perm):
    value, _ = ctx.op("stablehlo.recv", [token], [abstract_token], [out_shape, abstract_token],
                      props=_pairs(ctx, "precv", axis_name, perm))
    return value


def _not_here(prim):
    def rule(ctx, *args, **params):
        raise NotImplementedError(f"{prim} is currently only implemented on GPU (lowering for "
                                  f"{ctx.platform!r}); on other platforms use ppermute.")
    return rule


for _prim, _abstract, _gpu in ((psend_p, _psend_abstract, _psend_gpu),
                               (precv_p, _precv_abstract, _precv_gpu)):
    abstract_eval_rules[_prim] = _abstract
    effect_rules[_prim] = lambda params: frozenset({single_side_collective_effect})
    collective_axis_names[_prim] = _axis_names_param
    replication_rules[_prim] = lambda ins, **params: [frozenset()]
    register_lowering(_prim, _not_here(_prim.name))
    register_lowering(_prim, _gpu, platform="cuda")
    register_lowering(_prim, _gpu, platform="rocm")
