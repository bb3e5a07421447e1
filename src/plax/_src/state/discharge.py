"""``jax._src.state.discharge``: turning stateful jaxprs into pure ones. plax discharges the
refs a traced body uses itself (``plax.higher_order.ref_effects``) and has no state jaxprs."""
from plax._src import _face
from plax._src.state import _NO_STATE_IR

_REFUSED = dict.fromkeys(("run_state", "run_state_reference", "discharge_state",
                          "register_discharge_rule"), _NO_STATE_IR)

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
