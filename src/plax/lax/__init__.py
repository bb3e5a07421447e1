"""plax.lax: the primitive operations, one module per family.

The first-order families, lowest first (a module imports only those before it at module
level; a rule that needs a later family imports it in the function body): common <
batch_util < ad_util < conversion < shapes < elementwise_util < bitwise < comparison <
arithmetic < transcendental < indexing < slicing < reductions < the others (dot <
convolution, sort, collectives, fft, utility, key_layout < prng, sharding_constraint).

The families a program may never use (control flow, scan, special functions, windowed and
generic reductions, sort, convolution, FFT, collectives, typed-key primitives) load on first
use of one of their names, so ``import plax`` does not pay for them.
"""
from plax.first_order.arithmetic import *  # noqa: F401,F403
from plax.first_order.transcendental import *  # noqa: F401,F403
from plax.first_order.comparison import *  # noqa: F401,F403
from plax.first_order.bitwise import *  # noqa: F401,F403
from plax.first_order.conversion import *  # noqa: F401,F403
from plax.first_order.shapes import *  # noqa: F401,F403
from plax.first_order.slicing import *  # noqa: F401,F403
from plax.first_order.reductions import *  # noqa: F401,F403
from plax.first_order.indexing import *  # noqa: F401,F403
from plax.first_order.dot import *  # noqa: F401,F403
from plax.first_order.utility import *  # noqa: F401,F403
from plax.first_order.sharding_constraint import with_sharding_constraint  # noqa: F401
from plax.core import dtypes as _dtypes
# The primitives themselves, under JAX's names (for jaxpr interpreters and custom rules).
from plax.first_order.arithmetic import (  # noqa: F401
    abs_p, add_p, ceil_p, complex_p, conj_p, div_p, floor_p, imag_p, integer_pow_p, max_p,
    min_p, mul_p, neg_p, nextafter_p, pow_p, real_p, rem_p, round_p, sign_p, square_p, sub_p
)
from plax.first_order.transcendental import (  # noqa: F401
    acos_p, acosh_p, asin_p, asinh_p, atan2_p, atan_p, atanh_p, cbrt_p, cos_p, cosh_p,
    digamma_p, erf_inv_p, erf_p, erfc_p, exp2_p, exp_p, expm1_p, lgamma_p, log1p_p, log_p,
    logistic_p, rsqrt_p, sin_p, sinh_p, sqrt_p, tan_p, tanh_p
)
from plax.first_order.bitwise import (  # noqa: F401
    and_p, clz_p, not_p, or_p, population_count_p, shift_left_p, shift_right_arithmetic_p,
    shift_right_logical_p, xor_p
)
from plax.first_order.reductions import (  # noqa: F401
    argmax_p, argmin_p, cumlogsumexp_p, cummax_p, cummin_p, cumprod_p, cumsum_p, reduce_and_p,
    reduce_max_p, reduce_min_p, reduce_or_p, reduce_prod_p, reduce_sum_p, reduce_xor_p
)
from plax.first_order.conversion import (  # noqa: F401
    bitcast_convert_type_p, convert_element_type_p, stop_gradient_p
)
from plax.first_order.shapes import (  # noqa: F401
    broadcast_in_dim_p, concatenate_p, iota_p, pad_p, reshape_p, rev_p, squeeze_p, transpose_p
)
from plax.first_order.comparison import (  # noqa: F401
    clamp_p, eq_p, eq_to_p, ge_p, gt_p, is_finite_p, le_p, le_to_p, lt_p, lt_to_p, ne_p,
    select_n_p
)
from plax.first_order.slicing import (  # noqa: F401
    dynamic_slice_p, dynamic_update_slice_p, slice_p
)
from plax.first_order.indexing import (  # noqa: F401
    gather_p, scatter_add_p, scatter_max_p, scatter_min_p, scatter_mul_p, scatter_p, scatter_sub_p
)
from plax.first_order.sharding_constraint import (  # noqa: F401
    sharding_constraint_p
)


# Families loaded on first use of one of their names (PEP 562 ``__getattr__``): module ->
# the names plax.lax takes from it (its ``__all__`` and its primitives; a test keeps the
# two in step). Each registers its own primitives' rules, so nothing needs one of them
# before a program reaches for one of its names.
_LAZY_FAMILIES = {
    "plax.higher_order.cond": ("cond", "switch", "cond_p"),
    "plax.higher_order.loops": ("while_loop", "fori_loop", "while_p"),
    "plax.higher_order.scan": ("scan", "map", "scan_p"),
    "plax.higher_order.associative_scan": ("associative_scan",),
    "plax.higher_order.linear_solve": ("custom_linear_solve", "linear_solve_p"),
    "plax.higher_order.custom_root": ("custom_root",),
    "plax.higher_order.composite": ("composite",),
    "plax.higher_order.platform_dependent": ("platform_dependent",),
    "plax.first_order.tokens": ("create_token", "after_all", "create_token_p", "after_all_p"),
    "plax.higher_order.generic_reduce": ("reduce", "reduce_p"),
    "plax.higher_order.windowed": (
        "reduce_window", "padtype_to_pads", "reduce_window_shape_tuple", "reduce_window_p",
        "reduce_window_sum_p", "reduce_window_max_p", "reduce_window_min_p",
        "select_and_scatter_p", "select_and_scatter_add_p", "select_and_gather_add_p"),
    "plax.higher_order.special": (
        "igamma", "igammac", "igamma_grad_a", "random_gamma_grad", "polygamma", "zeta",
        "bessel_i0e", "bessel_i1e", "betainc", "igamma_p", "igammac_p", "igamma_grad_a_p",
        "polygamma_p", "zeta_p", "bessel_i0e_p", "bessel_i1e_p",
        "regularized_incomplete_beta_p"),
    "plax.first_order.sort": ("sort", "sort_key_val", "top_k", "sort_p", "top_k_p"),
    "plax.first_order.convolution": (
        "conv_general_dilated", "conv", "conv_with_general_padding", "conv_transpose",
        "conv_dimension_numbers", "conv_general_permutations", "conv_shape_tuple",
        "conv_general_shape_tuple", "conv_transpose_shape_tuple", "ConvDimensionNumbers",
        "ConvGeneralDilatedDimensionNumbers", "conv_general_dilated_p"),
    "plax.first_order.convolution_local": (
        "conv_general_dilated_patches", "conv_general_dilated_local"),
    "plax.first_order.fft": ("fft", "fft_p", "FftType"),
    "plax.first_order.rng_bit_generator": (
        "RandomAlgorithm", "rng_bit_generator", "rng_bit_generator_p", "rng_uniform",
        "rng_uniform_p"),
    "plax.first_order.scaled_dot": ("scaled_dot",),
    "plax.first_order.ragged_all_to_all": ("ragged_all_to_all", "ragged_all_to_all_p"),
    "plax.first_order.approx_topk": ("approx_max_k", "approx_min_k", "approx_top_k_p"),
    "plax.first_order.ragged_dot": (
        "ragged_dot", "ragged_dot_general", "RaggedDotDimensionNumbers"),
    "plax.first_order.send_recv": ("psend", "precv"),
    "plax.first_order.collectives": (
        "psum", "pmax", "pmin", "pmean", "all_gather", "psum_scatter", "all_to_all", "pswapaxes",
        "ppermute", "pshuffle", "axis_index", "axis_size", "pvary", "pbroadcast", "pcast",
        "psum_p", "pmax_p", "pmin_p", "all_gather_p", "all_to_all_p", "ppermute_p",
        "axis_index_p"),
}
_LAZY_NAMES = {name: module for module, names in _LAZY_FAMILIES.items() for name in names}
# ``import *`` gives them too (loading their families).
__all__ = sorted({n for n in globals() if not n.startswith("_")} | set(_LAZY_NAMES))
# Submodules: plax.lax.<name>.
_LAZY_SUBMODULES = {"linalg": "plax.lax.linalg",
                    "prng": "plax.first_order.prng"}  # the Threefry hash, typed-key primitives


def __getattr__(name):
    import importlib
    if name in _LAZY_NAMES:
        value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
    elif name in _LAZY_SUBMODULES:
        value = importlib.import_module(_LAZY_SUBMODULES[name])
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY_NAMES) | set(_LAZY_SUBMODULES))


def dtype(x):
    """The dtype ``x`` has as a plax value (canonical: float64 is float32 unless x64 is on)."""
    return _dtypes.dtype(x, canonicalize=True)
