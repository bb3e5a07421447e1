"""Lowering for TPUs from a CPU machine, as JAX 0.10.2 lowers there: its linear algebra is
XLA's own ops and custom calls, which XLA's TPU compiler expands (facts read from JAX's
modules exported with platforms=["tpu"])."""
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import export, lax
from plax.scipy import linalg as jsp_linalg

A = np.eye(4, dtype=np.float32)[None].repeat(2, 0) * 3 + 1
QDWH_SVD = {"Eigh", "Qr", "ProductOfElementaryHouseholderReflectors"}
QDWH_OPS = {"cholesky", "triangular_solve"}

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
    # eigh up to 256 rows: XLA's Jacobi call alone
    ("eigh", lambda x: lax.linalg.eigh(x), {"Eigh"}, set()),
    ("eigh_subset", lambda x: lax.linalg.eigh(x, subset_by_index=(1, 3)), {"Eigh"}, set()),
    ("jnp.linalg.eigh", lambda x: jnp.linalg.eigh(x), {"Eigh"}, set()),
    ("jnp.linalg.eigvalsh", lambda x: jnp.linalg.eigvalsh(x), {"Eigh"}, set()),
    # the QDWH SVD: QR and Cholesky steps of the polar decomposition, then the Jacobi eigh
    ("svd", lambda x: jnp.linalg.svd(x), QDWH_SVD, QDWH_OPS),
    ("svd_values", lambda x: jnp.linalg.svd(x, compute_uv=False), QDWH_SVD, QDWH_OPS),
    ("svd_wide", lambda x: jnp.linalg.svd(x[..., :3, :], full_matrices=False), QDWH_SVD,
     QDWH_OPS),
    ("jnp.linalg.pinv", lambda x: jnp.linalg.pinv(x), QDWH_SVD, QDWH_OPS),
    ("jnp.linalg.lstsq", lambda x: jnp.linalg.lstsq(x[0], x[0])[0], QDWH_SVD, QDWH_OPS),
    ("jnp.linalg.matrix_rank", lambda x: jnp.linalg.matrix_rank(x), QDWH_SVD, QDWH_OPS),
    ("jnp.linalg.norm_2", lambda x: jnp.linalg.norm(x, ord=2, axis=(-2, -1)), QDWH_SVD,
     QDWH_OPS),
    ("jnp.linalg.cond", lambda x: jnp.linalg.cond(x), QDWH_SVD, QDWH_OPS),
    ("scipy.linalg.polar", lambda x: jsp_linalg.polar(x[0]),
     {"Qr", "ProductOfElementaryHouseholderReflectors"}, QDWH_OPS),
    # the Thomas algorithm in lax ops
    ("tridiagonal_solve", lambda x: lax.linalg.tridiagonal_solve(x[..., 0], x[..., 1],
                                                                 x[..., 2], x), set(), set()),
]


def _facts(text):
    targets = set(re.findall(r"stablehlo.custom_call @(\w+)\(", text))
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


def _lower_for_tpu(fun, x):
    return plax.jit(fun).trace(x).lower(lowering_platforms=("tpu",)).as_text()


def _eigh_calls(text):
    return re.findall(r'custom_call @Eigh\(%\w+\) \{backend_config = "([^"]*)", '
                      r'api_version = 1 : i32\} : \((tensor<[^>]*>)\)', text)


@pytest.mark.parametrize("kwargs, config", [
    ({}, "1,1,100,1e-6"),
    (dict(lower=False, symmetrize_input=False, sort_eigenvalues=False), "0,0,100,1e-6"),
    (dict(implementation=lax.linalg.EighImplementation.JACOBI), "1,1,100,1e-6"),
])
def test_small_eigh_on_tpu_is_one_jacobi_call_with_jax_config(kwargs, config):
    text = _lower_for_tpu(lambda x: lax.linalg.eigh(x, **kwargs), A[0])
    assert _eigh_calls(text) == [(config, "tensor<4x4xf32>")]


def test_large_eigh_on_tpu_is_qdwh_divide_and_conquer_with_jacobi_leaves():
    x = np.eye(300, dtype=np.float32)
    text = _lower_for_tpu(lambda x: lax.linalg.eigh(x), x)
    assert _facts(text) == ({"Eigh", "Qr", "ProductOfElementaryHouseholderReflectors"},
                            {"cholesky", "triangular_solve"})
    # the leaves: unsorted Jacobi on the 256-row bucket; the recursion: a while loop
    assert _eigh_calls(text) == [("1,0,100,1e-6", "tensor<256x256xf32>")]
    assert "stablehlo.while" in text and "lapack_" not in text
    # Jacobi asked for: one call on the whole matrix
    jacobi = _lower_for_tpu(
        lambda x: lax.linalg.eigh(x, implementation=lax.linalg.EighImplementation.JACOBI), x)
    assert _facts(jacobi) == ({"Eigh"}, set())
    assert _eigh_calls(jacobi) == [("1,1,100,1e-6", "tensor<300x300xf32>")]


def test_tpu_refuses_the_algorithms_jax_refuses_there():
    with pytest.raises(NotImplementedError, match="QR algorithm is not supported on TPU"):
        _lower_for_tpu(lambda x: lax.linalg.eigh(
            x, implementation=lax.linalg.EighImplementation.QR), A)
    with pytest.raises(NotImplementedError, match="Only the POLAR .* SVD algorithm is "
                                                  "supported on TPU"):
        _lower_for_tpu(lambda x: lax.linalg.svd(x, algorithm=lax.linalg.SvdAlgorithm.QR), A)
    # POLAR is the TPU's default
    text = _lower_for_tpu(lambda x: lax.linalg.svd(x, algorithm=lax.linalg.SvdAlgorithm.POLAR),
                          A)
    assert _facts(text) == (QDWH_SVD, QDWH_OPS)


def test_empty_svd_on_tpu_needs_no_computation():
    text = _lower_for_tpu(lambda x: lax.linalg.svd(x), np.zeros((2, 0, 3), np.float32))
    assert _facts(text) == (set(), set())


# libtpu stops the whole process (a CHECK failure, JAX's too) on a dot whose operands and
# result differ in being complex, and on a conversion of real values to complex128.
_MM = (((1,), (0,)), ((), ()))


@pytest.mark.parametrize("operand, result", [(np.float32, np.complex64),
                                             (np.int8, np.complex64),
                                             (np.complex64, np.float32)])
def test_dot_between_real_and_complex_runs_in_complex(operand, result):
    lhs, rhs = np.ones((2, 3), operand), np.ones((3, 4), operand) * 2
    fun = lambda a, b: lax.dot_general(a, b, _MM, preferred_element_type=result)
    text = plax.jit(fun).trace(lhs, rhs).lower(lowering_platforms=("tpu",)).as_text()
    (dot,) = [line for line in text.splitlines() if "stablehlo.dot_general" in line]
    assert dot.count("complex<f32>") == 3, dot  # both operands and the product
    np.testing.assert_array_equal(fun(lhs, rhs), np.full((2, 4), 6, result))


def test_real_to_complex_conversion_goes_through_the_real_type():
    text = _lower_for_tpu(lambda x: x.astype(np.complex64), np.arange(4, dtype=np.int32))
    assert re.findall(r"\((tensor<4x\w+>)\) -> (tensor<4x[\w<>]+>)", text) == [
        ("tensor<4xi32>", "tensor<4xf32>"), ("tensor<4xf32>", "tensor<4xcomplex<f32>>")]


def test_conversion_to_complex128_is_refused_on_tpu_only():
    with plax.enable_x64():
        x = np.arange(4.0)
        with pytest.raises(NotImplementedError, match="to complex128 is not supported on TPU"):
            _lower_for_tpu(lambda v: v.astype(np.complex128), x)
        assert "complex<f64>" in plax.jit(lambda v: v.astype(np.complex128)).trace(x).lower(
            lowering_platforms=("cpu",)).as_text()
