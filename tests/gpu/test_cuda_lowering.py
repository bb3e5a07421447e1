"""Linear algebra lowered for CUDA (no GPU needed): each primitive's CUDA rule calls the
plugin's cuSOLVER kernels exactly as JAX 0.10.2 does. ``cuda_linalg_calls.json`` holds, per
case, the kernel calls of JAX's own CUDA lowering (``jax.export(..., platforms=["cuda"])``),
printed as XLA HLO with names stripped: the target, shapes, layouts, aliasing and kernel
attributes. A difference there is a wrong answer or a crash on a GPU, so it is checked here
where no GPU is. The numbers themselves are checked on a GPU by test_on_gpu.py."""
import importlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import export, lax
from plax.runtime import xla

CALLS = json.loads((Path(__file__).parent / "cuda_linalg_calls.json").read_text())

SVD = lax.linalg.SvdAlgorithm
CASES = {
    "cholesky": lambda a: lax.linalg.cholesky(a),
    "lu": lambda a: lax.linalg.lu(a),
    "qr": lambda a: jnp.linalg.qr(a),
    "qrc": lambda a: jnp.linalg.qr(a, mode="complete"),
    "eigh": lambda a: jnp.linalg.eigh(a),
    "svd": lambda a: jnp.linalg.svd(a),
    "svd_nouv": lambda a: jnp.linalg.svd(a, compute_uv=False),
    "svd_reduced": lambda a: jnp.linalg.svd(a, full_matrices=False),
    "svd_qr": lambda a: lax.linalg.svd(a, algorithm=SVD.QR),
    "svd_qr_reduced": lambda a: lax.linalg.svd(a, full_matrices=False, algorithm=SVD.QR),
    "svd_qr_nouv": lambda a: lax.linalg.svd(a, compute_uv=False, algorithm=SVD.QR),
    "trsm": lambda a: lax.linalg.triangular_solve(a, a, left_side=True, lower=True),
    "trsm_conj": lambda a: lax.linalg.triangular_solve(a, a, left_side=False, lower=False,
                                                       conjugate_a=True, unit_diagonal=True),
    "trsm_adj": lambda a: lax.linalg.triangular_solve(a, a, transpose_a=True,
                                                      conjugate_a=True),
}


def _kernel_calls(text: str) -> list[str]:
    """The custom calls and triangular solves of a StableHLO module, as XLA prints them,
    without instruction names, operands, metadata or partitioning attributes."""
    out = []
    for line in xla.stablehlo_to_hlo_text(text).splitlines():
        if "custom-call(" not in line and "triangular-solve(" not in line:
            continue
        line = re.sub(r"^\s*(ROOT )?%?[\w.\-]+ = ", "", line)
        line = re.sub(r", metadata=\{[^}]*\}", "", line)
        line = re.sub(r", frontend_attributes=\{[^}]*\}", "", line)
        line = re.sub(r"(custom-call|triangular-solve)\([^)]*\)", r"\1(..)", line)
        out.append(line.strip())
    return out


@pytest.fixture(scope="module", autouse=True)
def _x64():
    with plax.enable_x64(True):
        yield


@pytest.mark.parametrize("key", sorted(CALLS))
def test_cuda_linalg_lowering_calls_the_kernels_as_jax_does(key):
    name, shape, dtype = re.fullmatch(r"(\w+?)_(\d+(?:x\d+)*)_(\w+)", key).groups()
    fun = CASES[name]
    a = np.zeros(tuple(map(int, shape.split("x"))), dtype)
    text = export.export(plax.jit(fun), platforms=["cuda"])(a).mlir_module()
    assert _kernel_calls(text) == CALLS[key]


def test_the_cuda_rules_differ_from_the_cpu_ones():
    a = np.eye(4, dtype=np.float32)
    cuda = export.export(plax.jit(jnp.linalg.svd), platforms=["cuda"])(a).mlir_module()
    cpu = export.export(plax.jit(jnp.linalg.svd), platforms=["cpu"])(a).mlir_module()
    assert "cusolver_gesvdj_ffi" in cuda and "lapack_" not in cuda
    assert "lapack_sgesdd_ffi" in cpu and "cusolver" not in cpu


def test_divide_and_conquer_svd_is_refused_on_cuda_only():
    a = np.eye(3, dtype=np.float32)
    fun = plax.jit(lambda x: lax.linalg.svd(x, algorithm=SVD.DIVIDE_AND_CONQUER))
    with pytest.raises(NotImplementedError, match="only supported on AMD"):
        export.export(fun, platforms=["cuda"])(a)
    s = fun(a)[1]
    np.testing.assert_allclose(np.asarray(s), np.ones(3), rtol=1e-6)


def test_a_primitive_without_a_cuda_rule_names_the_platform():
    a = np.eye(3, dtype=np.float32)
    with pytest.raises(NotImplementedError, match="primitive 'schur' not found for platform cuda"):
        export.export(plax.jit(lax.linalg.schur), platforms=["cuda"])(a)


# --- the CUDA rules' own arithmetic, run on the CPU ---------------------------------------------
_LAPACK_CALL = importlib.import_module("plax.lax.linalg.lapack").call_target


def _stand_in_kernels(target, operands, results, *, matrix_operands=None, config=(),
                      aliases=()):
    """cuSOLVER's SVD kernels as their contract says (the one JAX's lowering relies on),
    computed with the CPU's SVD: gesvdj/gesvdp give U and V (not Vᴴ), full or economic;
    gesvd gives U and Vᴴ, swapped when it was handed the transpose of a wide matrix."""
    from plax.core.trace import get_aval
    from plax.lax.linalg.common import adjoint

    if not target.startswith("cusolver_"):  # (LAPACK, called by the CPU SVD below)
        return _LAPACK_CALL(target, operands, results, matrix_operands=matrix_operands,
                            config=config, aliases=aliases)
    (a,), cfg = operands, dict(config)
    svd_module = importlib.import_module("plax.lax.linalg.svd")
    s, u, vt, info = svd_module._cpu_kernel(a, get_aval(a), cfg["full_matrices"], True, None)
    if target in ("cusolver_gesvdj_ffi", "cusolver_gesvdp_ffi"):
        return [a, s, u, adjoint(vt), info]
    assert target == "cusolver_gesvd_ffi", target
    if not cfg["compute_uv"]:
        return [a, s, jnp.zeros((), a.dtype), jnp.zeros((), a.dtype), info]
    return [a, s, vt, u, info] if cfg["transposed"] else [a, s, u, vt, info]


SVD_RULE_CASES = [(shape, algorithm, full)
                  for shape, algorithm in [((6, 4), None), ((4, 6), None), ((40, 36), None),
                                           ((36, 40), None), ((2, 5, 3), None),
                                           ((1030, 5), None), ((5, 1030), None),
                                           ((7, 4), "QR"), ((4, 7), "QR")]
                  for full in (True, False)] + [((6, 4), "POLAR", False)]


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("shape,algorithm,full_matrices", SVD_RULE_CASES)
def test_the_cuda_svd_rule_reassembles_the_kernels_results(monkeypatch, dtype, shape,
                                                             algorithm, full_matrices):
    """The CUDA rule's own arithmetic (V to Vᴴ, cutting full factors, undoing gesvd's
    transpose), run on the CPU with the CPU's SVD standing in for cuSOLVER's kernels."""
    from functools import partial

    from plax.core.rules import platform_lowering_rules
    from plax.lax.linalg import lapack
    from plax.lowering.inline import lower_fun

    svd_module = importlib.import_module("plax.lax.linalg.svd")
    monkeypatch.setattr(lapack, "call_target", _stand_in_kernels)
    rule = lower_fun(partial(lambda x, **p: svd_module._svd(x, platform="cuda", **p)),
                     multiple_results=True)
    monkeypatch.setitem(platform_lowering_rules[svd_module.svd_p], "cpu", rule)
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape)
    if dtype == np.complex128:
        a = a + 1j * rng.standard_normal(shape)
    alg = None if algorithm is None else getattr(SVD, algorithm)
    u, s, vh = plax.jit(lambda x: lax.linalg.svd(x, full_matrices=full_matrices,
                                                 algorithm=alg))(a)
    u, s, vh = map(np.asarray, (u, s, vh))
    k = min(shape[-2:])
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-10, atol=1e-10)
    recon = (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]
    np.testing.assert_allclose(recon, a, rtol=1e-9, atol=1e-9)
    m, n = shape[-2:]
    assert u.shape[-2:] == ((m, m) if full_matrices else (m, k))
    assert vh.shape[-2:] == ((n, n) if full_matrices else (k, n))
    values = plax.jit(lambda x: lax.linalg.svd(x, compute_uv=False, algorithm=alg))(a)
    np.testing.assert_allclose(np.asarray(values), np.linalg.svd(a, compute_uv=False),
                               rtol=1e-10, atol=1e-10)
