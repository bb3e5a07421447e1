"""``jax._src.effects``: plax's effects (``plax.core.effects``) and JAX's registries of effect
types, in which a library declares what its effects may do (plax's own may do everything).
``ordered_effects.add_type(E)`` makes ``E`` ordered (plax's ``Effect.ordered``: the
lowering threads a token through its equations)."""
from plax.core import effects as _core
from plax.core.effects import (  # noqa: F401
    Effect, EffectTypeSet, JaxprInputEffect, control_flow_allowed_effects,
    custom_derivatives_allowed_effects, lowerable_effects, no_effects, ordered_effects,
    partial_eval_jaxpr_custom_rules_allowed_effects, remat_allowed_effects)

from plax._src import _face

Effects = frozenset

_REFUSED: dict = {}

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED, _core)
