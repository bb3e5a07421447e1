"""precision= as a DotAlgorithmPreset / DotAlgorithm (JAX 0.10.2's behaviour on CPU): the
presets XLA CPU honours run with their operand and accumulator types, the others are refused
with JAX's error, and the jaxpr keeps the preset through grad and vmap."""
import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax

P = lax.DotAlgorithmPreset
X = np.array([[1.0001, 2.3], [3.0, 4.0]], np.float32)
BF16 = np.dtype(ml_dtypes.bfloat16)


def _rounded_product(dtype):
    x = X.astype(dtype).astype(np.float64)
    return x @ x


# (precision, operand dtype, preferred_element_type, result dtype, reference, rtol)
ROWS = [
    (P.DEFAULT, np.float32, None, np.float32, X.astype(np.float64) @ X, 1e-6),
    (P.F32_F32_F32, np.float32, None, np.float32, X.astype(np.float64) @ X, 1e-6),
    ("F32_F32_F32", np.float16, None, np.float16, _rounded_product(np.float16), 2e-3),
    (P.F16_F16_F16, np.float32, None, np.float32, _rounded_product(np.float16), 2e-3),
    (P.BF16_BF16_F32, np.float32, None, np.float32, X.astype(np.float64) @ X, 1e-6),
    (P.BF16_BF16_F32, BF16, None, BF16, _rounded_product(BF16), 1e-2),
    (P.BF16_BF16_F32, BF16, np.float32, np.float32, _rounded_product(BF16), 1e-6),
    (P.BF16_BF16_F32, np.float32, np.float16, np.float16, X.astype(np.float64) @ X, 2e-3),
    (P.BF16_BF16_F32_X3, np.float32, None, np.float32, X.astype(np.float64) @ X, 1e-6),
    (P.BF16_BF16_F32_X6, np.float32, None, np.float32, X.astype(np.float64) @ X, 1e-6),
    (P.F64_F64_F64, np.float32, None, np.float32, X.astype(np.float64) @ X, 1e-6),
    (P.F32_F32_F32, np.int32, None, np.int32, np.full((2, 2), 2), 0),
]


@pytest.mark.parametrize("precision,dt,pref,out_dt,want,rtol", ROWS,
                         ids=[f"{r[0]}-{np.dtype(r[1]).name}-{r[2]}" for r in ROWS])
def test_presets_on_cpu(precision, dt, pref, out_dt, want, rtol):
    x = np.ones((2, 2), dt) if np.dtype(dt).kind == "i" else X.astype(dt)
    f = lambda a, b: lax.dot(a, b, precision=precision, preferred_element_type=pref)  # noqa: E731
    for got in (f(x, x), plax.jit(f)(x, x)):
        assert got.dtype == np.dtype(out_dt)
        np.testing.assert_allclose(np.asarray(got).astype(np.float64), want, rtol=rtol)


def test_lowering_carries_the_algorithm_attribute():
    text = plax.jit(lambda a: lax.dot(a, a, precision=P.BF16_BF16_F32_X3)).lower(X).as_text()
    assert ("algorithm = #stablehlo.dot_algorithm<lhs_precision_type = bf16, "
            "rhs_precision_type = bf16, accumulation_type = f32") in text
    assert "num_primitive_operations = 3" in text
    assert "dot_algorithm" not in plax.jit(
        lambda a: lax.dot(a, a, precision=P.DEFAULT)).lower(X).as_text()


@pytest.mark.parametrize("precision", [P.TF32_TF32_F32, P.BF16_BF16_BF16, P.F16_F16_F32,
                                       P.BF16_BF16_F32_X9, P.ANY_F8_ANY_F8_F32,
                                       lax.DotAlgorithm(np.float32, np.float32, np.float32)])
def test_refused_on_cpu(precision):
    with pytest.raises(ValueError, match="is not supported by dot_general on CPU"):
        lax.dot(X, X, precision=precision)


@pytest.mark.parametrize("bad", ["foo", (P.BF16_BF16_F32, P.BF16_BF16_F32), 3])
def test_bad_precision(bad):
    with pytest.raises(ValueError, match="Precision argument must be one of"):
        lax.dot(X, X, precision=bad)


def test_numpy_functions_and_transformations_keep_the_preset():
    for fn in (lambda a: jnp.matmul(a, a, precision=P.BF16_BF16_F32),
               lambda a: jnp.dot(a, a, precision="BF16_BF16_F32"),
               lambda a: jnp.einsum("ij,jk", a, a, precision=P.BF16_BF16_F32),
               lambda a: lax.dot_general(a, a, (([1], [0]), ([], [])),
                                         precision=P.BF16_BF16_F32)):
        eqns = plax.make_jaxpr(fn)(X).jaxpr.eqns
        assert [e.params["precision"] for e in eqns if e.primitive is lax.dot_general_p] == \
            [P.BF16_BF16_F32]
        np.testing.assert_allclose(np.asarray(fn(X)), X @ X, rtol=1e-6)
    grad_jaxpr = plax.make_jaxpr(plax.grad(
        lambda a: lax.dot(a, a, precision=P.BF16_BF16_F32).sum()))(X)
    assert {e.params["precision"] for e in grad_jaxpr.jaxpr.eqns
            if e.primitive is lax.dot_general_p} == {P.BF16_BF16_F32}
    np.testing.assert_allclose(
        np.asarray(plax.grad(lambda a: lax.dot(a, a, precision=P.F16_F16_F16).sum())(X)),
        np.ones((2, 2)) @ X.T + X.T @ np.ones((2, 2)), rtol=2e-3)
    got = plax.vmap(lambda a: lax.dot(a, a, precision=P.F16_F16_F16))(np.stack([X, 2 * X]))
    np.testing.assert_allclose(np.asarray(got[1]), 4 * _rounded_product(np.float16), rtol=2e-3)


def test_preset_properties():
    assert str(P.BF16_BF16_F32) == "BF16_BF16_F32" and repr(P.F16_F16_F16) == \
        "DotAlgorithmPreset.F16_F16_F16"
    assert P.F16_F16_F32.accumulation_type == np.float32
    assert P.DEFAULT.supported_lhs_types is None
    assert P.BF16_BF16_F32.supported_output_types(BF16, BF16) == (np.float32, BF16)
    algo = lax.DotAlgorithm(np.float16, np.float16, np.float32)
    assert algo.num_primitive_operations == 1 and not algo.allow_imprecise_accumulation


def test_a_preset_as_the_default_matmul_precision():
    # as JAX's config accepts the presets' names; a convolution keeps the default precision
    with plax.default_matmul_precision("F16_F16_F16"):
        eqns = plax.make_jaxpr(lambda a: a @ a)(X).jaxpr.eqns
        assert [e.params["precision"] for e in eqns] == [P.F16_F16_F16]
        np.testing.assert_allclose(np.asarray(plax.jit(lambda a: a @ a)(X)),
                                   _rounded_product(np.float16), rtol=2e-3)
        conv = plax.jit(lambda a: lax.conv(a[None, None], a[None, None], (1, 1), "VALID"))(X)
        assert "precision DEFAULT" in plax.jit(
            lambda a: lax.conv(a[None, None], a[None, None], (1, 1), "VALID")).lower(X).as_text()
    np.testing.assert_allclose(np.asarray(conv).ravel(), [np.sum(X * X)], rtol=1e-6)
    with pytest.raises(ValueError, match="must be one of"):
        plax.config.update("jax_default_matmul_precision", "F17_F17_F17")
