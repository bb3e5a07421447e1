"""plax.nn.initializers.orthogonal: JAX 0.10.2's weights for fixed keys (hard-coded), the
orthogonality of the flattened weight for any column_axis, scale, dtypes and errors."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
import plax.nn.initializers as I

# What JAX 0.10.2's initializers.orthogonal returns for these calls.
JAX_3x5 = [[0.81999, -0.03973, -0.2503, -0.48016, 0.1812],
           [0.53843, 0.06588, 0.20879, 0.81344, 0.0218],
           [-0.03698, -0.43861, 0.63081, -0.11874, 0.62788]]
JAX_SCALED_HEAD = [0.85371, -0.22812, 0.09265, -0.26059, 0.34953, 1.1467]
JAX_COLUMN0 = [[-0.12035, -0.10596, 0.98706], [0.59596, -0.8029, -0.01353]]


def test_orthogonal_gives_jax_weights():
    w = I.orthogonal()(plax.random.PRNGKey(0), (3, 5))
    assert w.dtype == np.float32
    np.testing.assert_allclose(np.asarray(w), JAX_3x5, atol=2e-5)
    w = I.orthogonal(scale=2.0, column_axis=0)(plax.random.PRNGKey(0), (2, 3, 4))
    assert w.shape == (2, 3, 4)
    np.testing.assert_allclose(np.asarray(w).ravel()[:6], JAX_SCALED_HEAD, atol=2e-5)
    w = I.orthogonal(column_axis=0)(plax.random.key(1), (2, 3))
    np.testing.assert_allclose(np.asarray(w), JAX_COLUMN0, atol=2e-5)


@pytest.mark.parametrize("shape,column_axis", [((6, 4), -1), ((2, 3, 4), 1), ((3, 8), -1)])
def test_orthogonal_weights_are_orthogonal(shape, column_axis):
    w = np.asarray(I.orthogonal(scale=3.0, column_axis=column_axis)(plax.random.PRNGKey(1), shape))
    m = np.moveaxis(w, column_axis, -1).reshape(-1, shape[column_axis]) / 3.0
    small = min(m.shape)
    gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-5)


def test_orthogonal_dtypes_jit_and_errors():
    assert I.orthogonal()(plax.random.PRNGKey(0), (2, 2), jnp.complex64).dtype == np.complex64
    with plax.enable_x64():
        assert I.orthogonal()(plax.random.PRNGKey(0), (2, 2)).dtype == np.float64
    jitted = plax.jit(I.orthogonal(), static_argnums=1)(plax.random.PRNGKey(0), (3, 5))
    np.testing.assert_allclose(np.asarray(jitted), JAX_3x5, atol=2e-5)
    with pytest.raises(ValueError, match="orthogonal initializer requires at least a 2D shape"):
        I.orthogonal()(plax.random.PRNGKey(0), (3,))


# What JAX 0.10.2's initializers.delta_orthogonal puts at the centre of a (3, 3, 2, 4) kernel
# for key(0).
JAX_DELTA_CENTRE = [[0.922, -0.24637, 0.10006, -0.28143], [0.31398, 0.20442, -0.70884, 0.59764]]


def test_delta_orthogonal():
    w = np.array(I.delta_orthogonal()(plax.random.key(0), (3, 3, 2, 4)))
    np.testing.assert_allclose(w[1, 1], JAX_DELTA_CENTRE, atol=2e-5)
    w[1, 1] = 0
    assert not w.any()  # zero away from the spatial centre
    w = np.asarray(I.delta_orthogonal(scale=2.0)(plax.random.key(1), (4, 3, 3)))
    np.testing.assert_allclose(w[1] @ w[1].T, 4 * np.eye(3), atol=1e-5)
    with pytest.raises(ValueError, match="`fan_in` must be less or equal than `fan_out`"):
        I.delta_orthogonal()(plax.random.key(0), (3, 4, 2))
    with pytest.raises(ValueError, match="requires a 3D, 4D or 5D shape"):
        I.delta_orthogonal()(plax.random.key(0), (3, 3))
