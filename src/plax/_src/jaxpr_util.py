"""``jax._src.jaxpr_util``: JAX's statistics of jaxprs (equation counts, pprof profiles, HTML);
plax has none."""
from plax._src import _face

_REFUSED = dict.fromkeys(
    ("all_eqns", "_all_eqns_with_traceback", "count_eqns", "jaxpr_to_html",
     "pprof_equation_profile", "primitives", "primitives_by_shape", "primitives_by_source",
     "source_locations", "var_defs_and_refs"),
    "plax has no jaxpr statistics or profiles (plax.core.jaxpr prints and checks jaxprs)")

__doc__ = _face.document(__doc__, _REFUSED)
__getattr__ = _face.face_getattr(__name__, _REFUSED)
