"""Linear algebra lowered for CUDA (no GPU needed): each primitive's CUDA rule calls the
plugin's cuSOLVER kernels exactly as JAX 0.10.2 does. ``cuda_linalg_calls.json`` holds, per
case, the kernel calls of JAX's own CUDA lowering (``jax.export(..., platforms=["cuda"])``),
printed as XLA HLO with names stripped: the target, shapes, layouts, aliasing and kernel
attributes. A difference there is a wrong answer or a crash on a GPU, so it is checked here
where no GPU is. The numbers themselves are checked on a GPU by test_on_gpu.py."""
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
    with pytest.raises(NotImplementedError, match="'schur' on platform 'cuda'"):
        export.export(plax.jit(lax.linalg.schur), platforms=["cuda"])(a)
