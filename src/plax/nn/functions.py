"""plax.nn's functions: the activation functions, softmax and its relatives, standardize and
one_hot, as in ``jax.nn``.

Everything is written on plax.numpy and plax.lax.  Where a function has a kink, its derivative
there is the one JAX 0.10 gives: ``relu`` and ``relu6`` carry custom JVP rules whose slope is 0
at the kinks, the rest take the slope of whichever branch their ``where`` selects.  ``softplus``
(hence ``log_sigmoid`` and ``mish``) is ``jnp.logaddexp(x, 0)``, whose rule gives
exp(x - softplus(x)), and ``log1mexp`` differentiates as 1 / expm1(x).  ``softmax`` has a
custom JVP rule (the tangent ``y * (t - sum(y * t))``), so its derivatives neither flow
through the stabilising max nor through masked-out elements.
"""
from __future__ import annotations

import operator
import warnings

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.api.jit import jit
from plax.core import dtypes
from plax.core.config import config
from plax.core.errors import ConcretizationTypeError
from plax.core.symbolic_shapes import DimExpr
from plax.core.trace import Tracer, get_aval
from plax.numpy.util import check_arraylike, is_arraylike, promote_args_inexact
from plax.scipy.special import logsumexp
from plax.higher_order.custom_derivatives import custom_jvp

__all__ = ["identity", "relu", "relu6", "sigmoid", "log_sigmoid", "softplus", "soft_sign",
           "silu", "swish", "gelu", "elu", "selu", "celu", "leaky_relu", "hard_tanh",
           "hard_sigmoid", "hard_silu", "hard_swish", "mish", "squareplus", "sparse_plus",
           "sparse_sigmoid", "glu", "tanh", "logsumexp", "logmeanexp", "log_softmax", "softmax",
           "standardize", "one_hot", "log1mexp"]

tanh = jnp.tanh

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _checked(name: str, x):
    check_arraylike(name, x)
    return jnp.asarray(x)


# --- piecewise-linear units --------------------------------------------------------------------
@jit
def identity(x):
    """The identity activation: ``x`` itself, as an array."""
    return _checked("identity", x)


def _relu_tangent(g, ans, x):
    return jnp.where(jnp.greater(x, 0), g, jnp.zeros_like(g))


@custom_jvp
@jit
def relu(x):
    """The rectified linear unit max(x, 0); its derivative at 0 is taken to be 0."""
    return jnp.maximum(x, 0)


relu.defjvps(_relu_tangent)


def _relu6_tangent(g, ans, x):
    inside = jnp.logical_and(jnp.greater(x, 0), jnp.less(x, 6))
    return jnp.where(inside, g, jnp.zeros_like(g))


@custom_jvp
@jit
def relu6(x):
    """min(max(x, 0), 6); its derivative at both kinks, 0 and 6, is taken to be 0."""
    return jnp.minimum(jnp.maximum(x, 0), 6.)


relu6.defjvps(_relu6_tangent)


@jit
def leaky_relu(x, negative_slope=1e-2):
    """x where x >= 0, ``negative_slope * x`` below (slope 1 at 0)."""
    x = _checked("leaky_relu", x)
    return jnp.where(jnp.greater_equal(x, 0), x, jnp.multiply(negative_slope, x))


@jit
def hard_tanh(x):
    """x clipped to [-1, 1] (slope 1 at the ends of the interval)."""
    x = _checked("hard_tanh", x)
    return jnp.where(jnp.greater(x, 1), 1, jnp.where(jnp.less(x, -1), -1, x))


@jit
def hard_sigmoid(x):
    """relu6(x + 3) / 6: a piecewise-linear sigmoid."""
    return jnp.divide(relu6(jnp.add(x, 3.)), 6.)


@jit
def hard_silu(x):
    """x * hard_sigmoid(x) (also called hard_swish)."""
    x = _checked("hard_silu", x)
    return jnp.multiply(x, hard_sigmoid(x))


hard_swish = hard_silu


@jit
def sparse_plus(x):
    """A piecewise softplus: 0 for x <= -1, x for x >= 1, (x + 1)**2 / 4 between."""
    x = _checked("sparse_plus", x)
    middle = jnp.divide(jnp.square(jnp.add(x, 1.)), 4.)
    return jnp.where(jnp.less_equal(x, -1.), 0., jnp.where(jnp.greater_equal(x, 1.), x, middle))


@jit
def sparse_sigmoid(x):
    """The derivative of sparse_plus: (x + 1) / 2 clipped to [0, 1]."""
    return jnp.multiply(0.5, jnp.clip(jnp.add(x, 1.), 0., 2.))


# --- smooth units ------------------------------------------------------------------------------
@jit(inline=True)
def sigmoid(x):
    """The logistic sigmoid 1 / (1 + exp(-x)); inexact inputs only, as in JAX."""
    return lax.logistic(x)


@jit
def softplus(x):
    """log(1 + exp(x)), computed as logaddexp(x, 0) (whose derivative at 0 is 1/2)."""
    return jnp.logaddexp(x, 0)


@jit
def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    x = _checked("log_sigmoid", x)
    return jnp.negative(softplus(jnp.negative(x)))


@jit
def soft_sign(x):
    """x / (|x| + 1)."""
    x = _checked("soft_sign", x)
    return jnp.divide(x, jnp.add(jnp.abs(x), 1))


@jit
def silu(x):
    """The sigmoid-weighted linear unit x * sigmoid(x) (also called swish)."""
    x = _checked("silu", x)
    return jnp.multiply(x, sigmoid(x))


swish = silu


@jit
def mish(x):
    """x * tanh(softplus(x))."""
    x = _checked("mish", x)
    return jnp.multiply(x, jnp.tanh(softplus(x)))


@jit
def squareplus(x, b=4):
    """(x + sqrt(x**2 + b)) / 2, a smooth relu; ``b`` sets the smoothness."""
    check_arraylike("squareplus", x, b)
    x, b = jnp.asarray(x), jnp.asarray(b)
    return jnp.divide(jnp.add(x, jnp.sqrt(jnp.add(jnp.square(x), b))), 2)


@jit
def elu(x, alpha=1.0):
    """x for x > 0, ``alpha * (exp(x) - 1)`` otherwise (the exponential branch at 0)."""
    x = _checked("elu", x)
    positive = jnp.greater(x, 0)
    negative_part = jnp.multiply(alpha, jnp.expm1(jnp.where(positive, 0., x)))
    return jnp.where(positive, x, negative_part)


@jit
def selu(x):
    """The scaled exponential linear unit: scale * elu(x, alpha) with the self-normalising
    constants scale = 1.0507..., alpha = 1.6732...."""
    return jnp.multiply(_SELU_SCALE, elu(x, _SELU_ALPHA))


@jit
def celu(x, alpha=1.0):
    """max(x, 0) + alpha * expm1(min(x, 0) / alpha): continuously differentiable at 0."""
    negative_part = jnp.expm1(jnp.divide(jnp.minimum(x, 0.), alpha))
    return jnp.add(jnp.maximum(x, 0.), jnp.multiply(alpha, negative_part))


def gelu(x, approximate: bool = True):
    """The Gaussian error linear unit x * Phi(x); with ``approximate`` (the default) Phi is the
    tanh approximation 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x**3)))."""
    (x,) = promote_args_inexact("gelu", x)
    dt = get_aval(x).dtype
    if approximate:
        inner = jnp.multiply(np.asarray(np.sqrt(2 / np.pi), dt),
                             jnp.add(x, jnp.multiply(0.044715, jnp.power(x, 3))))
        return jnp.multiply(x, jnp.multiply(0.5, jnp.add(1.0, jnp.tanh(inner))))
    scaled = jnp.multiply(jnp.negative(x), np.asarray(np.sqrt(0.5), dt))
    return jnp.asarray(jnp.multiply(jnp.multiply(0.5, x), lax.erfc(scaled)), dtype=dt)


@jit(static_argnames=("axis",))
def glu(x, axis: int = -1):
    """The gated linear unit: ``x`` split in two halves a, b along ``axis``, a * sigmoid(b)."""
    x = _checked("glu", x)
    if x.shape[axis] % 2 != 0:
        raise AssertionError("axis size must be divisible by 2")  # JAX's exception type
    first, second = jnp.split(x, 2, axis)
    return jnp.multiply(first, sigmoid(second))


def _log1mexp_tangent(g, ans, x):
    return jnp.divide(g, jnp.expm1(x))


@custom_jvp
@jit
def log1mexp(x):
    """log(1 - exp(-x)) for x >= 0, computed accurately both near 0 and for large x."""
    x = _checked("log1mexp", x)
    small = jnp.less(x, np.log(2.0))
    return jnp.where(small, jnp.log(jnp.negative(jnp.expm1(jnp.negative(x)))),
                     jnp.log1p(jnp.negative(jnp.exp(jnp.negative(x)))))


log1mexp.defjvps(_log1mexp_tangent)


# --- softmax and its relatives -----------------------------------------------------------------
def _count(x, axis, where, keepdims, dt):
    """How many elements each reduction over ``axis`` covers (the True ones of ``where``)."""
    ones = jnp.ones(jnp.shape(x), dt)
    if where is not None:
        ones = jnp.where(where, ones, jnp.zeros_like(ones))
    return jnp.sum(ones, axis=axis, keepdims=keepdims)


@jit(static_argnames=("axis", "keepdims"))
def logmeanexp(x, axis=None, where=None, keepdims=False):
    """log(mean(exp(x))) over ``axis`` (the elements ``where`` selects): logsumexp - log n."""
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    count = _count(x, axis, where, keepdims, get_aval(lse).dtype)
    return jnp.subtract(lse, jnp.log(count))


@jit(static_argnames=("axis",))
def log_softmax(x, axis=-1, where=None):
    """x - logsumexp(x) over ``axis`` (an int, a tuple of ints or None for all); elements that
    ``where`` masks out are -inf."""
    x = _softmax_operand("log_softmax", x)
    peak = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    kept = x if where is None else jnp.where(where, x, -np.inf)
    shifted = jnp.subtract(kept, lax.stop_gradient(peak))
    total = jnp.sum(jnp.exp(shifted), axis, where=where, keepdims=True)
    out = jnp.subtract(shifted, jnp.log(total))
    return out if where is None else jnp.where(where, out, -np.inf)


def _softmax_operand(name: str, x):
    """``x`` as an inexact array: integers become the default float type (as JAX's arithmetic
    makes them); booleans are refused, as JAX's subtraction refuses them."""
    check_arraylike(name, x)
    x = jnp.asarray(x)
    if x.dtype == np.bool_:
        raise TypeError(f"{name} does not accept dtype bool. Accepted dtypes are subtypes of "
                        "integer, floating, complexfloating.")
    (x,) = promote_args_inexact(name, x)
    return x


def _softmax_value(x, axis, where):
    return _softmax_ops(x, axis, where, stop_peak_gradient=False)


def _softmax_ops(x, axis, where, stop_peak_gradient):
    # Two derivative paths, as JAX's jax_softmax_custom_jvp chooses: the custom_jvp rule
    # below (flag on), or differentiating these ops with the peak held constant (off, the
    # default); the derivatives agree.
    peak = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    if stop_peak_gradient:
        peak = lax.stop_gradient(peak)
    kept = x if where is None else jnp.where(where, x, -np.inf)
    unnormalized = jnp.exp(jnp.subtract(kept, peak))
    out = jnp.divide(unnormalized, jnp.sum(unnormalized, axis, where=where, keepdims=True))
    return out if where is None else jnp.where(where, out, 0)


_softmax = custom_jvp(_softmax_value, nondiff_argnums=(1,))


@_softmax.defjvp
def _softmax_jvp(axis, primals, tangents):
    x, where = primals
    t = tangents[0]
    y = _softmax(x, axis, where)
    inner = jnp.sum(jnp.multiply(y, t), axis, where=where, keepdims=True)
    return y, jnp.multiply(y, jnp.subtract(t, inner))


def softmax(x, axis=-1, where=None):
    """exp(x) / sum(exp(x)) over ``axis`` (an int, a tuple of ints or None for all), so the
    outputs along it sum to 1; elements that ``where`` masks out are 0."""
    x = _softmax_operand("softmax", x)
    if where is not None:
        check_arraylike("softmax", where)
    if isinstance(axis, list):
        axis = tuple(axis)
    if config.read("softmax_custom_jvp"):  # (plax.softmax_custom_jvp)
        return _softmax(x, axis, where)
    return _softmax_ops(x, axis, where, stop_peak_gradient=True)


@jit(static_argnames=("axis", "algorithm"))
def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm: str = "fast"):
    """(x - mean) / sqrt(variance + epsilon) over ``axis``; the mean and variance are computed
    (over the elements ``where`` selects) unless given.  ``algorithm="fast"`` computes the
    variance as mean(x**2) - mean(x)**2 (clipped at 0), ``"stable"`` as mean((x - mean)**2)."""
    check_arraylike("standardize", x)
    for i, v in enumerate((mean, variance, where)):
        if v is not None and not is_arraylike(v):
            raise TypeError(f"standardize requires ndarray, scalar, or None arguments, got "
                            f"{type(v)} at position {i}.")
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(jnp.subtract(x, mean)), axis, keepdims=True,
                                where=where)
        elif algorithm == "fast":
            variance = jnp.subtract(jnp.mean(jnp.square(x), axis, keepdims=True, where=where),
                                    jnp.square(mean))
            variance = jnp.clip(variance, 0)
        else:
            raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    return jnp.multiply(jnp.subtract(x, mean), lax.rsqrt(jnp.add(variance, epsilon)))


# --- one_hot -----------------------------------------------------------------------------------
def _concrete_classes(num_classes):
    if isinstance(num_classes, Tracer):
        raise ConcretizationTypeError(
            num_classes, "The error arose in jax.nn.one_hot argument `num_classes`.")
    if type(num_classes) is DimExpr:  # a symbolic number of classes (plax.export)
        return num_classes
    return operator.index(num_classes)


@jit(static_argnames=("num_classes", "dtype", "axis"))
def _one_hot(x, num_classes: int, *, dtype, axis):
    if isinstance(axis, (int, np.integer)) and not isinstance(axis, bool):
        ndim = x.ndim + 1
        if not -ndim <= axis < ndim:
            raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
        pos = axis % ndim
        classes_shape = [1] * x.ndim
        classes_shape.insert(pos, num_classes)
        classes = lax.broadcasted_iota(x.dtype, tuple(classes_shape), pos)
        return jnp.equal(jnp.expand_dims(x, pos), classes).astype(dtype)
    size = lax.axis_size(axis)  # a mapped axis name: the classes are the positions along it
    if num_classes != size:
        raise ValueError(f"Expected num_classes to match the size of axis {axis}, "
                         f"but {num_classes} != {size}")
    return jnp.asarray(jnp.equal(x, lax.axis_index(axis)), dtype=dtype)


def one_hot(x, num_classes: int, *, dtype=None, axis=-1):
    """One-hot encode the indices ``x``: a new axis ``axis`` of length ``num_classes`` that is 1
    at each index and 0 elsewhere (indices outside [0, num_classes) give all zeros).  ``axis``
    may also be a mapped axis name, whose positions are the classes."""
    num_classes = _concrete_classes(num_classes)
    x = jnp.asarray(x)
    if not dtypes.issubdtype(x.dtype, np.integer):
        warnings.warn(f"jax.nn.one_hot input should be integer-typed; got dtype={x.dtype}",
                      DeprecationWarning, stacklevel=2)
    dtype = dtypes.canonicalize_dtype(np.float64) if dtype is None else np.dtype(dtype)
    return _one_hot(x, num_classes, dtype=dtype, axis=axis)
