"""einshape: reshapes and transposes written as an equation, ``"a(bc)->(ba)c"``.

Each side names the dimensions; parentheses on the left split a dimension into the named
ones, on the right merge them; a different order on the right transposes. An equation
becomes a sequence of transforms (``get_einshape_transforms``): the left side's splits
(``SplitDims``), one ``Transpose``, then the right side's merges (``MergeDims``). Sizes a
split cannot infer (all but one of its parts) are given as keyword arguments.
"""
from __future__ import annotations

import dataclasses
import math

from plax.core.trace import get_aval
from plax.first_order import shapes

__all__ = ["SplitDims", "MergeDims", "Transpose", "get_einshape_transforms", "einshape"]


@dataclasses.dataclass(frozen=True)
class SplitDims:
    """Dimension ``index`` split into dimensions of ``sizes``."""

    index: int
    sizes: tuple

    def transform_shape(self, shape) -> tuple:
        return (*shape[:self.index], *self.sizes, *shape[self.index + 1:])


@dataclasses.dataclass(frozen=True)
class MergeDims:
    """``count`` dimensions from ``index`` merged into one."""

    index: int
    count: int

    def transform_shape(self, shape) -> tuple:
        merged = math.prod(shape[self.index:self.index + self.count])
        return (*shape[:self.index], merged, *shape[self.index + self.count:])


@dataclasses.dataclass(frozen=True)
class Transpose:
    """The dimensions reordered: dimension ``k`` of the result is ``permutation[k]``."""

    permutation: tuple

    def transform_shape(self, shape) -> tuple:
        return tuple(shape[p] for p in self.permutation)


def _groups(side: str) -> list:
    """``"a(bc)d"`` -> ``[['a'], ['b', 'c'], ['d']]``."""
    side = side.replace(" ", "")
    groups, at = [], 0
    while at < len(side):
        c = side[at]
        if c == ")":
            raise ValueError(f"Unmatched parenthesis in {side!r}")
        if c == "(":
            end = side.find(")", at)
            if end < 0:
                raise ValueError(f"Unmatched parenthesis in {side!r}")
            groups.append(list(side[at + 1:end]))
            at = end + 1
        else:
            groups.append([c])
            at += 1
    return groups


def _sizes_of(lhs, input_shape, sizes) -> dict:
    known: dict = {}
    for group, size in zip(lhs, input_shape):
        if len(group) == 1:
            name = group[0]
            if name in known and known[name] != size:
                raise ValueError(f"Inconsistent size for {name}: {known[name]} vs {size}")
            known[name] = size
            continue
        for name in group:
            if name in sizes:
                known[name] = sizes[name]
        unknown = [n for n in group if n not in known]
        product = math.prod(known[n] for n in group if n in known)
        if not unknown:
            if product != size:
                raise ValueError(f"Size mismatch for group {group}: expected {size}, got "
                                 f"{product}")
        elif len(unknown) == 1:
            if size % product:
                raise ValueError(f"Cannot split size {size} with known sizes {product}")
            known[unknown[0]] = size // product
        else:
            raise ValueError(f"Ambiguous split for {group} with size {size}. Unknowns: "
                             f"{unknown}. Provide sizes via kwargs.")
    return known


def get_einshape_transforms(equation: str, input_shape, **sizes) -> list:
    """The splits, transpose and merges ``equation`` makes of an array of ``input_shape``."""
    if equation.count("->") != 1:
        raise ValueError("Equation must contain exactly one '->'")
    lhs, rhs = (_groups(s) for s in equation.split("->"))
    input_shape = tuple(input_shape)
    if len(lhs) != len(input_shape):
        raise ValueError(f"Equation LHS has {len(lhs)} groups but input has "
                         f"{len(input_shape)} dims. LHS: {lhs}, Input shape: {input_shape}")
    known = _sizes_of(lhs, input_shape, sizes)
    before = [n for g in lhs for n in g]
    after = [n for g in rhs for n in g]
    for name in after:
        if name not in known:
            if name not in sizes:
                raise ValueError(f"Unknown dimension {name} in RHS")
            known[name] = sizes[name]
    if set(before) != set(after):
        raise NotImplementedError("Only reordering/splitting/merging supported (no broadcast "
                                  "yet).")
    ops: list = []
    at = 0
    for group in lhs:
        if len(group) > 1:
            ops.append(SplitDims(at, tuple(known[n] for n in group)))
        at += len(group)
    if before != after:
        ops.append(Transpose(tuple(before.index(n) for n in after)))
    for k, group in enumerate(rhs):
        if len(group) > 1:
            ops.append(MergeDims(k, len(group)))
    return ops


def einshape(equation: str, x, assert_is_tile_preserving: bool = False, **sizes):
    """``x`` reshaped and transposed as ``equation`` says (see the module docstring).
    ``assert_is_tile_preserving`` concerns a TPU kernel's vector layout; interpret mode
    computes the same values either way."""
    del assert_is_tile_preserving
    for op in get_einshape_transforms(equation, get_aval(x).shape, **sizes):
        if type(op) is Transpose:
            x = shapes.transpose(x, op.permutation)
        else:
            x = shapes.reshape(x, op.transform_shape(get_aval(x).shape))
    return x
