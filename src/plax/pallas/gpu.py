"""GPU kernel primitives (Triton's inline assembly and barrier, Mosaic GPU's layout print).

They describe GPU instructions: abstract evaluation gives their types, and no backend plax
has lowers them, so a kernel that uses one fails off a GPU with JAX's error ("MLIR
translation rule for primitive ... not found for platform cpu"), in interpret mode too.
"""
from __future__ import annotations

from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, effectful_primitives

__all__ = ["elementwise_inline_asm_p", "debug_barrier_p", "print_layout_p"]

elementwise_inline_asm_p = Primitive("elementwise_inline_asm_p", multiple_results=True)
debug_barrier_p = Primitive("debug_barrier_p", multiple_results=True)
print_layout_p = Primitive("print_layout", multiple_results=True)


def _inline_asm_abstract(*avals, result_avals, **_):
    return list(result_avals)


abstract_eval_rules[elementwise_inline_asm_p] = _inline_asm_abstract
abstract_eval_rules[debug_barrier_p] = lambda *avals: []
abstract_eval_rules[print_layout_p] = lambda *avals, fmt: []
# a barrier and a print are kept even though nothing reads their (absent) results
effectful_primitives.update({debug_barrier_p, print_layout_p})
