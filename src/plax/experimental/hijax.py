"""``plax.experimental.hijax``: JAX's API for library-defined high-level types and the
primitives that act on them (flax.nnx's variables are built on it).

The types and how plax carries them are in ``plax.core.hi_types``. A ``HiPrimitive`` says
how it acts on hi values with ``to_lojax`` (plax array operations on the lo values inside).
plax expands it there, when it is bound, whatever transformation is running: its jvp,
transposition and batching are then those of the lo operations. (JAX keeps the primitive
in the jaxpr and expands it before lowering; the values are the same, but a jaxpr printed
by plax shows the lo operations.) A HiPrimitive whose ``is_high`` says False for some
arguments is an ordinary primitive there: its ``impl``, ``abstract_eval``, ``jvp`` and
``transpose`` methods are its rules, and ``to_lojax`` its lowering. A mutable hi value a
body being traced did not make (a ``jit``, loop or ``cond`` body closing over it) is read
and written as a ``plax.ref`` reference is: carried through the body
(``ref_effects.HiValueCell``). ``VJPHiPrimitive``, the class form (one instance per
operation), is ``plax.api.hi_primitive``.
"""
from plax.api.hi_primitive import VJPHiPrimitive  # noqa: F401
from plax.core.avals import AbstractValue, ShapedArray  # noqa: F401
from plax.core.effects import control_flow_allowed_effects  # noqa: F401
from plax.core.hi_types import (  # noqa: F401
    AvalMutableQDD, AvalQDD, HiType, MutableHiType, QuasiDynamicData, aval_method,
    aval_property, hi_type_of, is_hi_value, register_hitype)
from plax.core.primitive import Primitive
from plax.core.rules import (Zero, abstract_eval_rules, impl_rules, jvp_rules,  # noqa: F401
                             transpose_rules)
from plax.api.jit import typeof
from plax.core.trace import EvalTrace, current_trace
from plax.interpreters.ad import instantiate_zeros, is_undefined_primal  # noqa: F401
from plax.interpreters.mlir import lower_fun, register_lowering
from plax.higher_order import ref_effects
from plax.ref import AbstractRef, Ref  # noqa: F401

__all__ = ["AbstractValue", "ShapedArray", "AbstractRef", "AvalQDD", "AvalMutableQDD",
           "HiPrimitive", "HiType", "MutableHiType", "VJPHiPrimitive", "Zero", "aval_method",
           "aval_property", "control_flow_allowed_effects", "instantiate_zeros",
           "is_undefined_primal", "register_hitype"]


def _typeof(x):
    return hi_type_of(x) if is_hi_value(x) else typeof(x)


class HiPrimitive(Primitive):
    """A primitive acting on hi values. Subclasses define ``is_high``, ``abstract_eval``,
    ``to_lojax`` and, where it applies, ``impl``, ``jvp`` and ``transpose``."""

    def __init__(self, name):
        super().__init__(name)
        cls = type(self)
        # Rules for the arguments where ``is_high`` is False (see the module docstring).
        if cls.impl is not HiPrimitive.impl:
            impl_rules[self] = self.impl
        if cls.abstract_eval is not HiPrimitive.abstract_eval:
            abstract_eval_rules[self] = lambda *avals, **params: \
                self.abstract_eval(*avals, **params)[0]
        if cls.jvp is not HiPrimitive.jvp:
            jvp_rules[self] = self.jvp
        if cls.transpose is not HiPrimitive.transpose:
            transpose_rules[self] = self.transpose
        if cls.to_lojax is not HiPrimitive.to_lojax:
            register_lowering(self, lower_fun(self.to_lojax,
                                              multiple_results=self.multiple_results))

    def bind(self, *args, **params):
        if self.is_high(*map(_typeof, args), **params):
            if not (ref_effects.in_raw_access() or isinstance(current_trace(), EvalTrace)):
                # A mutable hi value from outside the body being traced is read and written
                # as a reference is: carried through the body, not baked into it.
                cells = [ref_effects.cell_of(a) for a in args if is_hi_value(a)
                         and type(a) is not Ref and hi_type_of(a).has_qdd]
                if cells:
                    return ref_effects.write_through(
                        cells, lambda: self.to_lojax(*args, **params))
            return self.to_lojax(*args, **params)
        return super().bind(*args, **params)

    def is_high(self, *avals, **params) -> bool:
        return True

    def is_effectful(self, params) -> bool:
        return False

    def impl(self, *args, **params):
        return self.to_lojax(*args, **params)

    def abstract_eval(self, *avals, **params):
        raise NotImplementedError(f"HiPrimitive {self.name} must define abstract_eval.")

    def to_lojax(self, *args, **params):
        raise NotImplementedError(f"HiPrimitive {self.name} must define to_lojax.")

    def jvp(self, primals, tangents, **params):
        raise NotImplementedError(f"HiPrimitive {self.name} must define jvp.")

    def transpose(self, *args, **params):
        raise NotImplementedError(f"HiPrimitive {self.name} must define transpose.")
