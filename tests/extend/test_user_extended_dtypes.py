"""A user's extended dtype (JAX's extension API: a ``dtypes.ExtendedDType`` subclass with
``_rules``), ``jax.experimental.EArray`` and ``primal_tangent_dtype``.

The dtype below is the pattern flax's fp8 layers use: float32 values whose cotangents
accumulate with ``max`` instead of ``+``, so a gradient can carry a running maximum.
"""
import dataclasses

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core import dtypes
from plax.core.avals import ShapedArray


class max_float(dtypes.extended):
    pass


class MaxRules:
    @staticmethod
    def physical_element_aval(dt):
        return ShapedArray((), dt.float_dtype)

    @staticmethod
    def convert_to(other, dt):
        return other == dt.float_dtype

    @staticmethod
    def convert_from(dt, other):
        return other == dt.float_dtype

    @staticmethod
    def add(dt, x, y):
        f = dt.float_dtype
        return lax.convert_element_type(
            lax.max(lax.convert_element_type(x, f), lax.convert_element_type(y, f)), dt)

    @staticmethod
    def zero(dt):
        return lax.convert_element_type(np.array(-np.inf, dt.float_dtype), dt)

    @staticmethod
    def tangent_dtype(dt):
        return dt

    @staticmethod
    def full(shape, fill_value, dt):
        raw = lax.full(shape, lax.convert_element_type(fill_value, dt.float_dtype),
                       dt.float_dtype)
        return lax.convert_element_type(raw, dt)


@dataclasses.dataclass(frozen=True)
class MaxFloat(dtypes.ExtendedDType):
    float_dtype: np.dtype
    _rules: type = MaxRules
    type: type = max_float
    name = property(lambda self: "maxf32")


MAXF32 = MaxFloat(np.dtype(np.float32))


def to_max(x):
    return lax.convert_element_type(x, MAXF32)


def to_f32(x):
    return lax.convert_element_type(x, np.float32)


@plax.custom_vjp
def observe(x, running):
    """x itself; its backward pass hands ``running``'s cotangent the largest |x| seen."""
    return x


observe.defvjp(lambda x, running: (x, jnp.max(jnp.abs(x))),
               lambda m, g: (g, to_max(jnp.broadcast_to(m, (1,)))))


def loss(xs, running):
    r = to_max(running)

    def step(c, x):
        return c + jnp.sum(observe(x, r)), None

    total, _ = lax.scan(step, 0.0, xs)
    return total


XS = np.array([[1.0, -5.0], [2.0, 3.0], [-4.0, 0.5]], np.float32)


@pytest.mark.parametrize("jit", [False, True])
def test_cotangents_of_a_user_dtype_accumulate_by_its_rules(jit):
    grad = plax.grad(loss, argnums=(0, 1))
    gx, grun = (plax.jit(grad) if jit else grad)(XS, np.zeros(1, np.float32))
    np.testing.assert_array_equal(gx, np.ones_like(XS))
    # max over the scan's steps of max|x| (a sum would give 5 + 3 + 4)
    np.testing.assert_array_equal(grun, [5.0])


def test_values_of_a_user_dtype_are_earrays_eagerly_and_from_jit():
    x = jnp.arange(3.0)
    for y in (to_max(x), plax.jit(to_max)(x)):
        assert isinstance(y, plax.experimental.EArray) and isinstance(y, plax.Array)
        assert y.dtype == MAXF32 and y.shape == (3,)
        np.testing.assert_array_equal(to_f32(y), [0.0, 1.0, 2.0])
    assert str(plax.make_jaxpr(to_max)(x)).count("maxf32[3]") == 1
    filled = lax.full((2,), 7.0, MAXF32)
    assert filled.dtype == MAXF32
    np.testing.assert_array_equal(to_f32(filled), [7.0, 7.0])
    again = plax.experimental.EArray(y.aval, to_f32(y))
    np.testing.assert_array_equal(to_f32(again), [0.0, 1.0, 2.0])


@pytest.mark.parametrize("value, dtype, error, match", [
    (np.arange(3, dtype=np.int32), MAXF32, ValueError,
     "Cannot convert_element_type from int32 to maxf32: the rules of maxf32 do not allow"),
    (None, np.int32, ValueError, "Cannot convert_element_type from maxf32 to int32"),
    (None, "key", ValueError, "cannot directly convert between extended dtypes: from maxf32"),
])
def test_conversions_a_user_dtype_refuses(value, dtype, error, match):
    value = to_max(jnp.ones(3)) if value is None else value
    if dtype == "key":
        dtype = plax.random.key(0).dtype
    with pytest.raises(error, match=match):
        lax.convert_element_type(value, dtype)


def test_primal_tangent_dtype_carries_tangents_in_its_tangent_dtype():
    from plax.experimental import primal_tangent_dtype
    dt = primal_tangent_dtype(np.float32, dtypes.ml_dtypes_module().bfloat16)
    assert dt.name == "PrimalTangentDType{f32/bf16}" and dt == primal_tangent_dtype(
        "float32", "bfloat16") and dtypes.issubdtype(dt, dtypes.extended)

    def f(x):
        return to_f32(lax.convert_element_type(x, dt)) * 2.0

    p, t = plax.jit(lambda x, t: plax.jvp(f, (x,), (t,)))(jnp.arange(3.0), jnp.full(3, 1.001))
    np.testing.assert_array_equal(p, [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(t, [2.0, 2.0, 2.0])  # 1.001 is 1.0 in bfloat16
    np.testing.assert_array_equal(plax.grad(lambda x: f(x).sum())(jnp.arange(3.0)), [2.0] * 3)
    with pytest.raises(ValueError, match="its representation dtype, which for .* is float32"):
        lax.convert_element_type(np.arange(3, dtype=np.int32), dt)


def test_custom_vjp_backward_runs_when_its_outputs_have_zero_cotangents():
    # As JAX's backward pass: the rule is called with zeros, and what it returns counts.
    @plax.custom_vjp
    def passthrough(x, state):
        return x * 2.0, state

    passthrough.defvjp(lambda x, state: (passthrough(x, state), state),
                       lambda state, g: (None, state + 1.0))

    @plax.custom_vjp
    def blocker(y):
        return y

    blocker.defvjp(lambda y: (y, None), lambda _, g: (None,))

    def f(x, state):
        y, _ = passthrough(x, state)
        return jnp.sum(blocker(y))

    gx, gs = plax.grad(f, argnums=(0, 1))(jnp.ones(2), jnp.array([3.0, 4.0]))
    np.testing.assert_array_equal(gx, [0.0, 0.0])
    np.testing.assert_array_equal(gs, [4.0, 5.0])


@pytest.mark.parametrize("jit", [False, True])
def test_vjp_of_an_integer_primal_with_a_float_tangent_dtype(jit):
    """An int8 primal whose tangent dtype is bfloat16 is differentiable: its cotangent is the
    custom backward rule's (integers alone would get float0 zeros)."""
    from plax.experimental import primal_tangent_dtype
    bf16 = dtypes.ml_dtypes_module().bfloat16
    dt = primal_tangent_dtype(np.int8, bf16)

    @plax.custom_vjp
    def f(x):
        return lax.convert_element_type(lax.convert_element_type(x, np.int8), bf16) * 2

    f.defvjp(lambda x: (f(x), None), lambda _, g: (3 * g,))
    x = lax.convert_element_type(jnp.array([1, 2, 3], np.int8), dt)
    g = jnp.array([1.0, 2.0, 4.0], bf16)

    def run(x, g):
        out, bwd = plax.vjp(f, x)
        return out, bwd(g)[0]

    out, ct = (plax.jit(run) if jit else run)(x, g)
    np.testing.assert_array_equal(np.asarray(out, np.float32), [2.0, 4.0, 6.0])
    assert ct.dtype == bf16
    np.testing.assert_array_equal(np.asarray(ct, np.float32), [3.0, 6.0, 12.0])


@pytest.mark.parametrize("jit", [False, True])
def test_custom_vjp_cotangent_of_a_user_dtype_for_a_float_primal(jit):
    """A bwd rule may give a float32 input a cotangent of a user dtype: it is kept (not cast
    to float32), so uses of the value accumulate it by the dtype's rules (max, not +)."""
    @plax.custom_vjp
    def tag(x):
        return x

    tag.defvjp(lambda x: (x, None), lambda _, g: (to_max(g),))

    @plax.custom_vjp
    def release(x):
        return x

    release.defvjp(lambda x: (x, None), lambda _, g: (to_f32(g),))

    def f(x):
        y = release(x)
        return jnp.sum(tag(y) * 2.0 + tag(y) * 3.0)

    grad = plax.grad(f)
    g = (plax.jit(grad) if jit else grad)(jnp.ones(2))
    np.testing.assert_array_equal(g, [3.0, 3.0])  # max(2, 3), where a sum would give 5
