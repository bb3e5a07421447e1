"""``jax._src.state.discharge``: stateful jaxprs turned into pure ones
(``plax.transforms.discharge``) and ``run_state`` (``plax.higher_order.run_state``)."""
from plax.higher_order.run_state import run_state, run_state_p, run_state_reference  # noqa: F401
from plax.transforms.discharge import discharge_state, register_discharge_rule  # noqa: F401

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {})
