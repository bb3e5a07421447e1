"""plax.custom_derivatives: user-defined derivative rules (as ``jax.custom_derivatives``)."""
from plax.higher_order.closure_convert import closure_convert  # noqa: F401
from plax.higher_order.custom_derivatives import (CustomVJPPrimal, SymbolicZero,  # noqa: F401
                                                custom_jvp, custom_jvp_call_p, custom_vjp,
                                                custom_vjp_call_p, custom_vjp_primal_tree_values,
                                                zero_from_primal)
from plax.higher_order.linear_call import linear_call  # noqa: F401
from plax.higher_order.remat_opt import remat_opt_p  # noqa: F401
from plax.higher_order.custom_gradient import custom_gradient  # noqa: F401
