"""Bitwise primitives on integers (logical ones on bools): not, and, or, xor, shifts,
population count and leading-zero count. Their outputs are piecewise constant, so
their derivatives are zero."""
from __future__ import annotations

from plax.first_order.ad_util import defzero
from plax.first_order.elementwise_util import binop, unop

__all__ = ["bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left",
           "shift_right_arithmetic", "shift_right_logical", "population_count", "clz"]

not_p, bitwise_not = unop("not", "intbool", "stablehlo.not",
                          "Elementwise bitwise NOT (logical NOT for bool).", public="bitwise_not")
population_count_p, population_count = unop("population_count", "int", "stablehlo.popcnt",
                                            "Elementwise count of set bits.")
clz_p, clz = unop("clz", "int", "stablehlo.count_leading_zeros",
                  "Elementwise count of leading zero bits.")
and_p, bitwise_and = binop("and", "intbool", "stablehlo.and", "Elementwise bitwise AND.",
                           public="bitwise_and")
or_p, bitwise_or = binop("or", "intbool", "stablehlo.or", "Elementwise bitwise OR.",
                         public="bitwise_or")
xor_p, bitwise_xor = binop("xor", "intbool", "stablehlo.xor", "Elementwise bitwise XOR.",
                           public="bitwise_xor")
shift_left_p, shift_left = binop("shift_left", "int", "stablehlo.shift_left", "Elementwise x << y.")
shift_right_arithmetic_p, shift_right_arithmetic = binop(
    "shift_right_arithmetic", "int", "stablehlo.shift_right_arithmetic",
    "Elementwise arithmetic (sign-filling) right shift.")
shift_right_logical_p, shift_right_logical = binop(
    "shift_right_logical", "int", "stablehlo.shift_right_logical",
    "Elementwise logical (zero-filling) right shift.")

for _p in (not_p, population_count_p, clz_p, and_p, or_p, xor_p, shift_left_p,
           shift_right_arithmetic_p, shift_right_logical_p):
    defzero(_p)
