"""Every primitive that lowers for the CPU lowers for TPUs too, or raises JAX's error there
(JAX has no TPU lowering for non-symmetric eig, schur, hessenberg, tridiagonal reduction
and pivoted QR)."""
import importlib
import pkgutil

import numpy as np
import pytest

import plax
from plax import lax
from plax.scipy import linalg as scipy_linalg
from plax.core.rules import lowering_rule, lowering_rules, platform_lowering_rules

# Primitives JAX 0.10.2 lowers for CPUs (and GPUs) only (plax's pivoted QR is JAX's geqp3).
CPU_ONLY_IN_JAX = {"eig", "schur", "hessenberg", "tridiagonal", "qr_pivoted"}


def _all_primitives():
    for info in pkgutil.walk_packages(plax.__path__, "plax."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)  # each module registers its primitives' rules
    return set(lowering_rules) | set(platform_lowering_rules)


def test_every_primitive_with_a_cpu_lowering_has_one_for_tpu():
    prims = _all_primitives()
    assert len(prims) > 200
    missing = sorted(p.name for p in prims
                     if lowering_rule(p, "cpu") is not None and lowering_rule(p, "tpu") is None)
    assert missing == sorted(CPU_ONLY_IN_JAX)


SQ = np.eye(3, dtype=np.float32) * 2 + np.arange(9, dtype=np.float32).reshape(3, 3) / 10


@pytest.mark.parametrize("name, fun", [
    ("eig", lambda x: lax.linalg.eig(x)),
    ("schur", lambda x: lax.linalg.schur(x)),
    ("hessenberg", lambda x: lax.linalg.hessenberg(x)),
    ("tridiagonal", lambda x: lax.linalg.tridiagonal(x)),
    ("qr_pivoted", lambda x: scipy_linalg.qr(x, pivoting=True)),
])
def test_what_jax_does_not_lower_for_tpu_raises_its_error(name, fun):
    with pytest.raises(NotImplementedError,
                       match=f"MLIR translation rule for primitive '{name}' not found for "
                             "platform tpu"):
        plax.jit(fun).trace(SQ).lower(lowering_platforms=("tpu",))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_ormqr_by_its_reflectors_equals_lapack(left, transpose, dtype):
    from plax.lax.linalg.ormqr import _by_reflectors
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2, 5, 3)).astype(dtype)
    if dtype == np.complex64:
        a = a + 1j * rng.normal(size=a.shape).astype(np.float32)
    c = rng.normal(size=(2, 5, 4) if left else (2, 4, 5)).astype(dtype)
    h, taus = lax.linalg.geqrf(a)
    want = lax.linalg.ormqr(h, taus, c, left=left, transpose=transpose)
    got = plax.jit(lambda h, t, c: _by_reflectors(h, t, c, left=left, transpose=transpose))(
        h, taus, c)
    np.testing.assert_allclose(got, want, atol=2e-6)
    text = plax.jit(lambda h, t, c: lax.linalg.ormqr(h, t, c, left=left, transpose=transpose)
                    ).trace(h, taus, c).lower(lowering_platforms=("tpu",)).as_text()
    assert "stablehlo.while" in text and "custom_call" not in text
