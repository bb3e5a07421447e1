"""The TPU-style kernels of tests/pallas/kernels.py, run in interpret mode on the CPU, each
against its jnp reference; vmap and jvp of a pallas_call."""
import numpy as np
import pytest

import plax
from tests.pallas.kernels import KERNELS, built

TOLERANCE = {"tiled_matmul": 1e-3, "causal_flash_forward": 1e-4}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_matches_its_reference(name):
    kernel = built(name)
    got = np.asarray(kernel.fn(*kernel.args))
    want = np.asarray(kernel.reference(*kernel.args))
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = TOLERANCE.get(name, 1e-5)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_aliased_output_reuses_the_donated_input():
    kernel = built("aliased_accumulate")
    acc = plax.device_put(kernel.args[0])
    out = kernel.fn(acc, kernel.args[1])
    assert acc.is_deleted()
    np.testing.assert_allclose(np.asarray(out), kernel.args[0] + 2 * kernel.args[1], rtol=1e-6)


def test_vmap_of_a_pallas_call_adds_a_batch_axis():
    kernel = built("row_softmax")
    xs = np.stack([kernel.args[0], -kernel.args[0][::-1]])
    got = plax.vmap(kernel.fn)(xs)
    want = np.stack([np.asarray(kernel.reference(x)) for x in xs])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_jvp_of_a_pallas_call_matches_the_references():
    kernel = built("elementwise")
    x, y = kernel.args
    dx, dy = np.ones_like(x), np.full_like(y, 0.5)
    out, tangent = plax.jvp(kernel.fn, (x, y), (dx, dy))
    want_out, want_tangent = plax.jvp(kernel.reference, (x, y), (dx, dy))
    np.testing.assert_allclose(np.asarray(out), np.asarray(want_out), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(tangent), np.asarray(want_tangent), rtol=1e-5,
                               atol=1e-6)

