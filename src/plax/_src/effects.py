"""``jax._src.effects``: plax's effects (``plax.core.effects``) and JAX's registries of effect
types. ``ordered_effects.add_type(E)`` makes ``E`` ordered (plax's ``Effect.ordered``: the
lowering threads a token through its equations). plax lets every effect into lowering,
control flow, remat and custom derivatives, so those registries record declarations only
(as plax's own ``control_flow_allowed_effects``)."""
from plax.core import effects as _core
from plax.core.effects import (Effect, EffectTypeSet, JaxprInputEffect,  # noqa: F401
                               control_flow_allowed_effects, no_effects)

from plax._src import _face

Effects = frozenset

_REFUSED: dict = {}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _core)


class _OrderedEffectTypes(EffectTypeSet):
    """Effect types that run in program order: adding one sets its ``ordered``."""

    def add_type(self, effect_type) -> None:
        effect_type.ordered = True
        super().add_type(effect_type)

    def contains(self, effect) -> bool:
        return bool(getattr(effect, "ordered", False))


ordered_effects = _OrderedEffectTypes()
lowerable_effects = EffectTypeSet()
remat_allowed_effects = EffectTypeSet()
custom_derivatives_allowed_effects = EffectTypeSet()
partial_eval_jaxpr_custom_rules_allowed_effects = EffectTypeSet()
