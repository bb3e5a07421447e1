"""plax.nn.initializers: the same weights as JAX 0.10.2's initializers for the same key
(JAX's values, rounded to 6 decimals, hard-coded as the reference), fans and errors."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
import plax.nn.initializers as I

k = plax.random.PRNGKey(1)

JAX_VALUES = {
    'zeros': ('float32', [[0.0, 0.0], [0.0, 0.0]]),
    'ones16': ('float16', [1.0, 1.0]),
    'const': ('float32', [3.5, 3.5, 3.5]),
    'uniform': ('float32', [[0.219316, 0.266876, 0.222959], [0.219198, 0.448681, 0.279473]]),
    'normal': ('float32', [[-0.308874, 0.169415, -0.271961], [-0.310073, 2.533335, 0.296595]]),
    'tnormal': ('float32', [-0.147358, 0.080844, -0.129758, -0.147929]),
    'glorot_uniform': ('float32', [[-0.113631, 0.062498, -0.10014, -0.114068], [0.735773, 0.109147, 0.895982, 0.633244], [-0.211495, 0.259151, -0.482361, -0.179585]]),
    'glorot_normal': ('float32', [[-0.089545, 0.049127, -0.07885, -0.089892], [0.71183, 0.085988, 1.077275, 0.571303], [-0.168188, 0.207443, -0.407293, -0.142299]]),
    'lecun_uniform': ('float32', [[-0.122735, 0.067506, -0.108163, -0.123207], [0.794726, 0.117892, 0.967771, 0.683982], [-0.228441, 0.279915, -0.52101, -0.193974]]),
    'lecun_normal': ('float32', [[-0.09672, 0.053063, -0.085168, -0.097095], [0.768865, 0.092877, 1.163589, 0.617077], [-0.181663, 0.224064, -0.439927, -0.1537]]),
    'he_uniform': ('float32', [[-0.173574, 0.095468, -0.152966, -0.174241], [1.123912, 0.166725, 1.368635, 0.967296], [-0.323064, 0.395859, -0.736819, -0.27432]]),
    'he_normal': ('float32', [[-0.136782, 0.075042, -0.120445, -0.137313], [1.087339, 0.131348, 1.645564, 0.872679], [-0.256911, 0.316875, -0.62215, -0.217365]]),
    'xavier_uniform': ('float32', [[-0.113631, 0.062498, -0.10014, -0.114068], [0.735773, 0.109147, 0.895982, 0.633244], [-0.211495, 0.259151, -0.482361, -0.179585]]),
    'kaiming_normal': ('float32', [[-0.136782, 0.075042, -0.120445, -0.137313], [1.087339, 0.131348, 1.645564, 0.872679], [-0.256911, 0.316875, -0.62215, -0.217365]]),
    'vs_fanout_normal': ('float32', [[[-0.077219, 0.042354, -0.06799, -0.077518], [0.633334, 0.074149, 1.07078, 0.501337], [-0.145168, 0.179172, -0.353964, -0.122778]], [[0.442791, 0.39306, 0.444464, 0.274663], [0.482904, -0.898592, 0.430227, -0.808803], [-0.029972, -0.752737, -0.500364, 0.321783]]]),
    'vs_geo': ('float32', [[[-0.096045, 0.052826, -0.084642, -0.096415], [0.621906, 0.092255, 0.757322, 0.535245], [-0.178765, 0.219045, -0.407712, -0.151792]], [[0.48843, 0.444642, 0.489838, 0.326491], [0.521064, -0.72596, 0.477712, -0.69979], [-0.037406, -0.679088, -0.534509, 0.375732]]]),
    'vs_batch': ('float32', [[[-0.09672, 0.053063, -0.085168, -0.097095], [0.768865, 0.092877, 1.163589, 0.617077], [-0.181663, 0.224064, -0.439927, -0.1537]], [[0.547449, 0.487491, 0.549453, 0.342529], [0.59528, -1.035875, 0.532365, -0.953188], [-0.037553, -0.897113, -0.61593, 0.400535]]]),
    'vs_complex_u': ('complex64', [[(-0.689244+0.47703j), (-0.461908-0.146545j)], [(0.154706+0.891028j), (0.185618+0.369441j)]]),
    'vs_complex_t': ('complex64', [[(-0.659958+0.456761j), (-0.362005-0.11485j)], [(0.161732+0.931495j), (0.142754+0.284127j)]]),
}

CASES = {
    'zeros': lambda: I.zeros(k, (2, 2)),
    'ones16': lambda: I.ones(k, (2,), jnp.float16),
    'const': lambda: I.constant(3.5)(k, (3,)),
    'uniform': lambda: I.uniform(0.5)(k, (2, 3)),
    'normal': lambda: I.normal(2.0)(k, (2, 3)),
    'tnormal': lambda: I.truncated_normal(1.0)(k, (4,)),
    'vs_fanout_normal': lambda: I.variance_scaling(2.0, "fan_out", "normal")(k, (2, 3, 4)),
    'vs_geo': lambda: I.variance_scaling(1.0, "fan_geo_avg", "uniform", in_axis=0, out_axis=(1, 2))(k, (2, 3, 4)),
    'vs_batch': lambda: I.variance_scaling(1.0, "fan_in", "truncated_normal", batch_axis=0)(k, (2, 3, 4)),
    'vs_complex_u': lambda: I.variance_scaling(1.0, "fan_in", "uniform")(k, (2, 2), jnp.complex64),
    'vs_complex_t': lambda: I.variance_scaling(1.0, "fan_in", "truncated_normal")(k, (2, 2), jnp.complex64),
    'glorot_uniform': lambda: I.glorot_uniform()(k, (3, 4)),
    'glorot_normal': lambda: I.glorot_normal()(k, (3, 4)),
    'lecun_uniform': lambda: I.lecun_uniform()(k, (3, 4)),
    'lecun_normal': lambda: I.lecun_normal()(k, (3, 4)),
    'he_uniform': lambda: I.he_uniform()(k, (3, 4)),
    'he_normal': lambda: I.he_normal()(k, (3, 4)),
    'xavier_uniform': lambda: I.xavier_uniform()(k, (3, 4)),
    'kaiming_normal': lambda: I.kaiming_normal()(k, (3, 4)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name):
    dtype, want = JAX_VALUES[name]
    got = np.asarray(CASES[name]())
    assert str(got.dtype) == dtype
    wide = np.complex128 if np.iscomplexobj(got) else np.float64
    np.testing.assert_allclose(got.astype(wide), np.asarray(want, wide), rtol=1e-5, atol=2e-6)


def test_errors():
    with pytest.raises(ValueError, match="invalid mode for variance scaling initializer"):
        I.variance_scaling(1.0, "fan", "normal")(k, (2, 2))
    with pytest.raises(ValueError, match="invalid distribution for variance scaling"):
        I.variance_scaling(1.0, "fan_in", "cauchy")(k, (2, 2))
    with pytest.raises(ValueError, match="Can't compute input and output sizes"):
        I.glorot_uniform()(k, (3,))


def test_variance_matches_the_fan():
    w = np.asarray(I.he_normal()(plax.random.PRNGKey(2), (400, 300)), np.float64)
    assert abs(w.var() - 2.0 / 400) < 0.1 * 2.0 / 400
    w = np.asarray(I.glorot_uniform()(plax.random.PRNGKey(3), (200, 600)), np.float64)
    assert abs(w.var() - 2.0 / 800) < 0.1 * 2.0 / 800
    assert np.abs(w).max() <= np.sqrt(3 * 2.0 / 800)


def test_initializers_run_under_jit_and_vmap():
    init = I.lecun_normal()
    a = plax.jit(lambda key: init(key, (3, 4)))(k)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(init(k, (3, 4))))
    keys = plax.random.split(k, 2)
    b = plax.vmap(lambda key: init(key, (3, 4)))(keys)
    np.testing.assert_array_equal(np.asarray(b[1]), np.asarray(init(keys[1], (3, 4))))
    assert I.zeros(k, (2,), jnp.bfloat16).dtype == jnp.bfloat16
