"""Lowering for TPUs from a CPU machine, as JAX 0.10.2 lowers there: its linear algebra is
XLA's own ops and custom calls, which XLA's TPU compiler expands (facts read from JAX's
modules exported with platforms=["tpu"])."""
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import export, lax

A = np.eye(4, dtype=np.float32)[None].repeat(2, 0) * 3 + 1

# (name, function, custom-call targets, XLA linear-algebra ops)
ROWS = [
    ("cholesky", lambda x: lax.linalg.cholesky(x), set(), {"cholesky"}),
    ("triangular_solve", lambda x: lax.linalg.triangular_solve(x, x, left_side=True,
                                                               lower=True),
     set(), {"triangular_solve"}),
    ("lu", lambda x: lax.linalg.lu(x), {"LuDecomposition"}, set()),
    ("qr", lambda x: lax.linalg.qr(x), {"Qr", "ProductOfElementaryHouseholderReflectors"},
     set()),
    ("householder_product", lambda x: lax.linalg.householder_product(x, x[..., 0]),
     {"ProductOfElementaryHouseholderReflectors"}, set()),
    ("jnp.linalg.solve", lambda x: jnp.linalg.solve(x, x), {"LuDecomposition"},
     {"triangular_solve"}),
    ("jnp.linalg.det", lambda x: jnp.linalg.det(x), {"LuDecomposition"}, set()),
    ("jnp.linalg.cholesky", lambda x: jnp.linalg.cholesky(x), set(), {"cholesky"}),
]


def _facts(text):
    targets = set(re.findall(r'call_target_name = "(\w+)"', text))
    ops = set(re.findall(r'"stablehlo\.(cholesky|triangular_solve)"', text))
    return targets, ops


@pytest.mark.parametrize("name, fun, targets, ops", ROWS, ids=[r[0] for r in ROWS])
def test_linear_algebra_lowers_for_tpu_as_jax(name, fun, targets, ops):
    exported = export.export(plax.jit(fun), platforms=["tpu"])(A)
    assert exported.platforms == ("tpu",) and exported.mlir_module_serialized
    assert _facts(exported.mlir_module()) == (targets, ops)
    text = plax.jit(fun).trace(A).lower(lowering_platforms=("tpu",)).as_text()
    assert _facts(text) == (targets, ops)
    # nothing of the CPU's kernels leaks into a TPU module
    assert "lapack_" not in text


def test_lu_on_tpu_is_one_call_with_jax_api_version():
    text = plax.jit(lambda x: lax.linalg.lu(x)).trace(A).lower(
        lowering_platforms=("tpu",)).as_text()
    (call,) = [line for line in text.split("\n") if "LuDecomposition" in line]
    assert "api_version = 2 : i32" in call
    assert "(tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2x4xi32>, tensor<2x4xi32>)" in call


def test_lowering_for_several_platforms_at_once_is_refused():
    traced = plax.jit(jnp.sin).trace(A)
    with pytest.raises(NotImplementedError, match="one platform at a time"):
        traced.lower(lowering_platforms=("cpu", "tpu"))


def test_a_module_lowered_for_tpu_is_not_compiled_for_the_cpu():
    lowered = plax.jit(jnp.sin).trace(A).lower(lowering_platforms=("tpu",))
    assert "stablehlo.sine" in lowered.as_text()
    with pytest.raises(ValueError, match="lowered for platform 'tpu'.*'cpu' device"):
        lowered.compile()
    # lowered for its own platform, it compiles and runs as usual
    own = plax.jit(jnp.sin).trace(A).lower(lowering_platforms=("cpu",)).compile()
    np.testing.assert_allclose(own(A), np.sin(A), rtol=1e-6)


@pytest.mark.parametrize("fun, direction, config", [
    (lambda x: lax.approx_max_k(x, 2), "gt",
     "aggregate_to_topk = true, recall_target = 0.949999988079071 : f32, reduction_dim = 1 : "
     "i64, reduction_input_size_override = -1 : i64, top_k = 2 : i64"),
    (lambda x: lax.approx_min_k(x, 3, recall_target=0.9, aggregate_to_topk=False), "lt",
     "aggregate_to_topk = false, recall_target = 0.8999999761581421 : f32, reduction_dim = 1 "
     ": i64, reduction_input_size_override = -1 : i64, top_k = 3 : i64"),
], ids=["max_k", "min_k"])
def test_approx_top_k_is_xla_custom_call_on_tpu(fun, direction, config):
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    exported = export.export(plax.jit(fun), platforms=["tpu"])(x)
    text = exported.mlir_module()
    assert _facts(text) == ({"ApproxTopK"}, set())
    assert f"called_computations = [@top_k_{direction}_f32_comparator]" in text
    assert f"mhlo.backend_config = {{{config}}}" in text
    assert f"comparison_direction {direction.upper()}" in text
    # on the CPU the same function is XLA's exact fallback
    vals, idx = plax.jit(fun)(x)
    want = np.sort(x, 1)[:, ::-1][:, :2] if direction == "gt" else np.sort(x, 1)
    np.testing.assert_array_equal(vals, want)
