"""``jax._src.jaxpr_util``: statistics of jaxprs (equation counts and histograms, tracebacks,
pprof profiles; ``plax.core.jaxpr_stats``) and their HTML view (``plax.core.jaxpr_html``)."""
from plax.core.jaxpr_html import jaxpr_to_html  # noqa: F401
from plax.core.jaxpr_stats import (all_eqns, count_eqns, histogram,  # noqa: F401
                                   pprof_equation_profile, primitives, primitives_by_shape,
                                   primitives_by_source, source_locations, var_defs_and_refs)
from plax.core.jaxpr_stats import all_eqns_with_traceback as _all_eqns_with_traceback  # noqa: F401
from plax.core.jaxpr_stats import pprof_profile as _pprof_profile  # noqa: F401
