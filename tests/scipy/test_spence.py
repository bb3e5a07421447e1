"""plax.scipy.special.spence against scipy.special.spence, with its derivative."""
import numpy as np
import pytest
import scipy.special as sp

import plax
from plax.scipy import special as S
from plax.test_util import check_grads
from helpers import close

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
# every branch (x < 1/2 reflected, [1/2, 2] direct, x > 2 inverted), their joins, 0, 1,
# huge values, and NaN below 0 and at inf (as SciPy)
X = np.array([-1, 0, 1e-30, 1e-8, 0.3, 0.4999, 0.5, 0.9, 1, 1.0001, 1.5, 2, 2.0001, 2.5, 10,
              1e10, np.inf, np.nan])


def test_values():
    x32 = X.reshape(2, 9).astype(np.float32)
    out = plax.jit(plax.vmap(S.spence))(x32)
    close(out, sp.spence(x32.astype(float)), F32, 3e-7, 1e-7)
    with plax.enable_x64():
        x = np.concatenate([X, np.linspace(0, 5, 101), np.geomspace(1e-300, 1e300, 41),
                            1 + np.linspace(-1e-6, 1e-6, 11)])
        close(plax.jit(S.spence)(x), sp.spence(x), F64, 5e-14, 1e-15)
    # like JAX: floating-point input only, and a Python float gives a (non-weak) float32
    shape = plax.eval_shape(S.spence, 0.5)
    assert shape.dtype == F32 and not shape.weak_type
    with pytest.raises(TypeError, match="x.dtype=int32 is not supported"):
        S.spence(np.arange(3, dtype=np.int32))
    with pytest.raises(TypeError, match="spence requires ndarray or scalar arguments"):
        S.spence([0.5])


def test_derivative():
    with plax.enable_x64():
        x = np.array([0.05, 0.3, 0.7, 1.0, 1.3, 2.5, 40.0])
        check_grads(S.spence, (x,), order=2, modes=("fwd", "rev"))
        g = plax.vmap(plax.grad(S.spence))(x)
        with np.errstate(invalid="ignore"):
            want = np.where(x == 1, -1, np.log(x) / (1 - x))
        close(g, want, F64, 1e-14)
