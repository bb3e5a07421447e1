"""``plax.extend.core.primitives``: plax's built-in primitives under JAX's names.

A name maps to the plax primitive JAX's of that name corresponds to (``jit_p`` is plax's
``pjit_p``, named ``jit``; ``remat_p`` its ``checkpoint``; ``scatter_add_p`` its
``scatter-add``; ...). The families load when a name is first read. A JAX primitive plax
has no counterpart for is absent.
"""
import importlib as _importlib

# JAX's name (without ``_p``) -> (plax module, attribute) where it differs from the
# usual place: ``plax.lax`` and its families.
_WHERE = {
    "jit": ("plax.higher_order.pjit", "pjit_p"),
    "call": ("plax.higher_order.call", "call_p"),
    "closed_call": ("plax.higher_order.call", "closed_call_p"),
    "remat": ("plax.higher_order.remat", "checkpoint_p"),
    "name": ("plax.higher_order.remat", "name_p"),
    "cond": ("plax.higher_order.cond", "cond_p"),
    "while": ("plax.higher_order.loops", "while_p"),
    "scan": ("plax.higher_order.scan", "scan_p"),
    "custom_jvp_call": ("plax.higher_order.custom_derivatives", "custom_jvp_call_p"),
    "custom_vjp_call": ("plax.higher_order.custom_derivatives", "custom_vjp_call_p"),
    "custom_lin": ("plax.higher_order.custom_derivatives", "custom_lin_p"),
    "reduce": ("plax.higher_order.generic_reduce", "reduce_p"),
    "reduce_window": ("plax.higher_order.windowed", "reduce_window_p"),
    "regularized_incomplete_beta": ("plax.higher_order.special", "betainc_p"),
    "linear_solve": ("plax.higher_order.linear_solve", "linear_solve_p"),
    "random_gamma": ("plax.random.gamma_family", "random_gamma_p"),
    "create_token": ("plax.first_order.tokens", "create_token_p"),
    "after_all": ("plax.first_order.tokens", "after_all_p"),
    "add_jaxvals": ("plax.interpreters.ad", "add_jaxvals_p"),
}

# Every JAX primitive plax has, by JAX's name without ``_p``.
_NAMES = frozenset("""
abs acos acosh add add_jaxvals all_gather all_to_all and argmax argmin asin asinh atan atan2 atanh
axis_index bessel_i0e bessel_i1e bitcast_convert_type broadcast_in_dim call cbrt ceil cholesky
clamp closed_call clz complex concatenate cond conj conv_general_dilated convert_element_type
copy cos cosh cumlogsumexp cummax cummin cumprod cumsum custom_jvp_call custom_lin custom_vjp_call
digamma div dot_general dynamic_slice dynamic_update_slice eig eigh eq eq_to erf erf_inv erfc exp
exp2 expm1 fft floor gather ge gt householder_product igamma igamma_grad_a igammac imag
integer_pow iota is_finite jit le le_to lgamma log log1p logistic lt lt_to lu max min mul name ne neg
nextafter not or pad pmax pmin polygamma population_count pow ppermute psum qr random_bits
random_fold_in random_seed random_split real reduce reduce_and reduce_max reduce_min
reduce_or reduce_precision reduce_prod reduce_sum reduce_window reduce_window_max
approx_top_k rng_bit_generator rng_uniform select_and_gather_add select_and_scatter
select_and_scatter_add ragged_all_to_all
reduce_window_min reduce_window_sum reduce_xor regularized_incomplete_beta rem remat reshape
rev round rsqrt scan scatter scatter_add scatter_max scatter_min scatter_mul select_n
sharding_constraint shift_left shift_right_arithmetic shift_right_logical sign sin sinh
slice sort sqrt square squeeze stop_gradient sub svd tan tanh threefry2x32 top_k transpose
triangular_solve tridiagonal_solve while xor zeta
after_all create_token linear_solve random_gamma
hessenberg schur tridiagonal
""".split())


def _find(base: str):
    where = _WHERE.get(base)
    if where is not None:
        return getattr(_importlib.import_module(where[0]), where[1])
    for module in ("plax.lax", "plax.lax.linalg", "plax.first_order.prng"):
        found = getattr(_importlib.import_module(module), base + "_p", None)
        if found is not None:
            return found
    from plax.core.rules import all_primitives
    wanted = base.replace("_", "-") if base.startswith("scatter_") else base
    for prim in all_primitives:
        if prim.name == wanted:
            return prim
    raise AttributeError(f"plax has no primitive for {base}_p")


def __getattr__(name):
    if name.endswith("_p") and name[:-2] in _NAMES:
        prim = _find(name[:-2])
        globals()[name] = prim
        return prim
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {n + "_p" for n in _NAMES})
