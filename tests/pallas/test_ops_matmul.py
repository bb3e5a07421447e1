"""plax.experimental.pallas.ops.tpu.matmul and example_kernel (JAX's names and signatures),
run in interpret mode on the CPU, against numpy."""
import numpy as np
import pytest

import plax.numpy as jnp
from plax.experimental.pallas.ops.tpu import example_kernel
from plax.experimental.pallas.ops.tpu import matmul as mm

CASES = [  # m, k, n, block_shape, block_k, dtype, out_dtype
    (256, 512, 128, (128, 128), 128, np.float32, None),
    (128, 256, 256, (64, 128), 256, jnp.bfloat16, np.float32),
    (64, 256, 128, (32, 128), 64, np.int8, np.int32),
]


@pytest.mark.parametrize("m,k,n,block_shape,block_k,dtype,out_dtype", CASES)
def test_matmul_matches_numpy(m, k, n, block_shape, block_k, dtype, out_dtype):
    rng = np.random.default_rng(0)
    if np.dtype(dtype).kind == "i":
        x, y = rng.integers(-8, 8, (m, k)), rng.integers(-8, 8, (k, n))
    else:
        x, y = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    x, y = x.astype(dtype), y.astype(dtype)
    got = mm.matmul(x, y, block_shape=block_shape, block_k=block_k, out_dtype=out_dtype)
    assert got.dtype == np.dtype(out_dtype or dtype) and got.shape == (m, n)
    want = x.astype(np.float64) @ y.astype(np.float64)
    tol = 1e-4 if out_dtype is None else 1e-3
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol)


def test_matmul_needs_an_out_dtype_for_mixed_inputs():
    x = np.ones((128, 128), np.float32)
    with pytest.raises(TypeError, match="Cannot deduce output dtype for different input"):
        mm.matmul(x, x.astype(jnp.bfloat16), block_shape=(128, 128), block_k=128)


def test_example_kernel_doubles():
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    np.testing.assert_array_equal(np.asarray(example_kernel.double(x)), 2 * x)
