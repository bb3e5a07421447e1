"""pl.estimate_cost: a kernel's cost (flops, transcendentals, bytes) read off its jaxpr, for
``pallas_call(cost_estimate=...)``.

The model is JAX's: elementwise arithmetic costs one flop per output element, the listed
unary ops one flop (or one transcendental) per element, ``integer_pow`` squarings and
multiplies, ``dot_general`` two flops per multiply-add; calls (jit, custom_vjp, run_state)
cost their bodies; everything else (data movement, reductions, control flow) is free. Bytes
accessed are the function's inputs and outputs.
"""
from __future__ import annotations

import math

from plax import tree_util
from plax.core.avals import ShapedArray
from plax.core.jaxpr import ClosedJaxpr, Jaxpr
from plax.core.staging import trace_to_jaxpr
from plax.experimental.pallas.core import CostEstimate

__all__ = ["estimate_cost", "cost_estimate_jaxpr"]

_ELEMENTWISE = {"add", "mul", "sub", "div", "min", "max", "or", "and", "xor"}
_UNARY = {"neg", "floor", "ceil", "round", "not"}
_TRANSCENDENTAL = {"cos", "sin", "tan", "sinh", "cosh", "tanh", "acos", "asin", "atan", "exp",
                   "log", "logistic", "sqrt"}
_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "custom_vjp_call": "call_jaxpr",
          "run_state": "jaxpr"}


def _size(aval) -> int:
    return math.prod(aval.shape)


def _integer_pow_flops(y: int) -> int:
    """Flops per element of x**y by repeated squaring: a squaring per bit below the highest,
    a multiply per set bit."""
    if y in (0, 1):
        return 0
    return (y.bit_length() - 1) + bin(y).count("1")


def _dot_flops(lhs, rhs, dimension_numbers) -> int:
    (lhs_contract, rhs_contract), (_, rhs_batch) = dimension_numbers
    contracted = math.prod(lhs.shape[d] for d in lhs_contract)
    lhs_free = math.prod(n for d, n in enumerate(lhs.shape) if d not in lhs_contract)
    rhs_free = math.prod(n for d, n in enumerate(rhs.shape)
                         if d not in rhs_contract and d not in rhs_batch)
    return 2 * contracted * lhs_free * rhs_free


def _eqn_cost(eqn) -> tuple[int, int, int]:
    """(flops, transcendentals, bytes) of one equation."""
    name = eqn.primitive.name
    ins = [v.aval for v in eqn.invars]
    if name in _ELEMENTWISE:
        return _size(eqn.outvars[0].aval), 0, 0
    if name in _UNARY:
        return _size(ins[0]), 0, 0
    if name in _TRANSCENDENTAL:
        return 0, _size(ins[0]), 0
    if name == "integer_pow":
        return _size(ins[0]) * _integer_pow_flops(int(eqn.params["y"])), 0, 0
    if name == "dot_general":
        return _dot_flops(ins[0], ins[1], eqn.params["dimension_numbers"]), 0, 0
    if name in _CALLS:
        body = eqn.params[_CALLS[name]]
        cost = cost_estimate_jaxpr(body if isinstance(body, ClosedJaxpr)
                                   else ClosedJaxpr(body, ()))
        return cost.flops, cost.transcendentals, cost.bytes_accessed
    return 0, 0, 0


def cost_estimate_jaxpr(closed: ClosedJaxpr) -> CostEstimate:
    """The summed cost of ``closed``'s equations (bytes: only what calls inside count)."""
    jaxpr: Jaxpr = closed.jaxpr
    flops = transcendentals = bytes_accessed = 0
    for eqn in jaxpr.eqns:
        f, t, b = _eqn_cost(eqn)
        flops, transcendentals, bytes_accessed = flops + f, transcendentals + t, \
            bytes_accessed + b
    return CostEstimate(flops=flops, transcendentals=transcendentals,
                        bytes_accessed=bytes_accessed)


def estimate_cost(fun, *args, **kwargs) -> CostEstimate:
    """The cost of ``fun(*args, **kwargs)`` (arrays or ShapeDtypeStructs): its operations'
    flops and transcendentals, and the bytes of its inputs and outputs."""
    leaves, tree = tree_util.tree_flatten(args)
    avals = [ShapedArray(tuple(a.shape), a.dtype) for a in leaves]
    box = []

    def flat(*xs):
        out = fun(*tree_util.tree_unflatten(tree, list(xs)), **kwargs)
        outs = tree_util.tree_leaves(out)
        box.append([ShapedArray(tuple(o.shape), o.dtype) for o in outs])
        return outs
    jaxpr, consts = trace_to_jaxpr(flat, avals, description="estimate_cost")
    inner = cost_estimate_jaxpr(ClosedJaxpr(jaxpr, consts))
    moved = sum(_size(a) * a.dtype.itemsize for a in avals + box[0])
    return CostEstimate(flops=inner.flops, transcendentals=inner.transcendentals,
                        bytes_accessed=inner.bytes_accessed + moved)
