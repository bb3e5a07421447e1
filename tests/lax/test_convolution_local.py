"""lax.conv_general_dilated_patches and lax.conv_general_dilated_local against NumPy loops."""
import numpy as np
import pytest

import plax
from plax import lax
from plax.test_util import check_grads


def _windows_nchw(x, filt, strides):
    """NumPy patches of a VALID convolution, NCHW: (N, C*prod(filt), *out)."""
    n, c, h, w = x.shape
    oh, ow = (h - filt[0]) // strides[0] + 1, (w - filt[1]) // strides[1] + 1
    out = np.zeros((n, c * filt[0] * filt[1], oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            win = x[:, :, i * strides[0]:i * strides[0] + filt[0],
                    j * strides[1]:j * strides[1] + filt[1]]
            out[:, :, i, j] = win.reshape(n, -1)
    return out


@pytest.mark.parametrize("filt, strides", [((2, 2), (1, 1)), ((3, 2), (2, 1)), ((1, 3), (1, 2))])
def test_patches_match_numpy_windows(filt, strides):
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 7)).astype(np.float32)
    got = lax.conv_general_dilated_patches(x, filt, strides, "VALID")
    np.testing.assert_allclose(got, _windows_nchw(x, filt, strides), rtol=1e-6)


def test_patches_with_nhwc_layout():
    x = np.random.default_rng(1).standard_normal((1, 5, 4, 2)).astype(np.float32)
    got = lax.conv_general_dilated_patches(x, (2, 2), (1, 1), "VALID",
                                           dimension_numbers=("NHWC", "OIHW", "NHWC"))
    want = _windows_nchw(x.transpose(0, 3, 1, 2), (2, 2), (1, 1)).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_local_convolution_uses_one_kernel_per_location():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    filt, strides = (2, 2), (1, 1)
    patches = _windows_nchw(x, filt, strides)  # (N, K, OH, OW)
    w = rng.standard_normal((4, patches.shape[1], *patches.shape[2:])).astype(np.float32)
    got = lax.conv_general_dilated_local(x, w, strides, "VALID", filt)
    want = np.einsum("nkij,okij->noij", patches, w)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    f = lambda x, w: lax.conv_general_dilated_local(x, w, strides, "VALID", filt)
    check_grads(f, (x, w), order=1, modes=("rev",))
    np.testing.assert_allclose(plax.jit(f)(x, w), want, rtol=1e-5, atol=1e-5)
