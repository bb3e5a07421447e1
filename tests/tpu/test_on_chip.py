"""plax on a real TPU chip through libtpu (marked ``tpu``: ``make tpu`` and bench/tpu_check.sh
run them; ``make test`` deselects them, and where plax runs on no TPU each one fails, saying
why: tests/conftest.py). Every answer is checked against NumPy on the host."""
import re

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax

pytestmark = pytest.mark.tpu

RNG = np.random.default_rng(0)


def _normal(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return np.abs(got - want).max() / np.abs(want).max()


def _spd(n, batch=()):
    a = _normal(batch + (n, n)).astype(np.float64)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(np.float32)


# --- platform and devices ----------------------------------------------------------------------
def test_the_tpu_is_the_default_backend():
    assert plax.default_backend() == "tpu"
    assert plax.devices() == plax.devices("tpu")
    assert plax.device_count() == len(plax.devices()) >= 1
    assert (jnp.arange(4) * 2).devices() == {plax.devices()[0]}


def test_tpu_devices_describe_themselves_as_in_jax():
    for i, d in enumerate(plax.devices()):
        assert d.platform == "tpu" and d.id == i and d.process_index == 0
        assert d.device_kind == "TPU v5 lite"
        # (jaxlib's TPU device, as JAX 0.10.2 shows it on a v5e)
        assert re.fullmatch(rf"TpuDevice\(id={i}, process_index=0, coords=\(\d+,\d+,\d+\), "
                            r"core_on_chip=0\)", repr(d)), repr(d)
        coords = tuple(d.coords)
        assert len(coords) == 3 and all(isinstance(c, int) and c >= 0 for c in coords)
        assert d.core_on_chip == 0
        assert isinstance(d.local_hardware_id, int) and d.local_hardware_id >= 0
        stats = d.memory_stats()
        assert isinstance(stats, dict) and stats["bytes_limit"] > 2 ** 30
        assert 0 <= stats["bytes_in_use"] <= stats["bytes_limit"]


def test_the_cpu_stays_available_beside_the_tpu():
    tpu, cpu = plax.devices("tpu")[0], plax.devices("cpu")[0]
    assert cpu.platform == "cpu"
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    on_tpu = plax.device_put(x, tpu)
    on_cpu = plax.device_put(on_tpu * 2, cpu)
    assert on_tpu.devices() == {tpu} and on_cpu.devices() == {cpu}
    np.testing.assert_array_equal(np.asarray(on_cpu), 2 * x)
    uncommitted = jnp.asarray(x)  # on the TPU, the default device
    back = plax.jit(lambda v: v + 1, backend="cpu")(uncommitted)
    assert back.devices() == {cpu}
    np.testing.assert_array_equal(np.asarray(back), x + 1)


# --- transformations ---------------------------------------------------------------------------
def test_jit_grad_and_vmap():
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    f = plax.jit(lambda v: jnp.sin(v) * v + jnp.exp(-v * v))
    np.testing.assert_allclose(np.asarray(f(x)), np.sin(x) * x + np.exp(-x * x),
                               rtol=2e-5, atol=2e-6)
    g = plax.jit(plax.grad(lambda v: jnp.sum(jnp.sin(v) * v)))
    np.testing.assert_allclose(np.asarray(g(x)), np.cos(x) * x + np.sin(x), rtol=2e-5,
                               atol=2e-6)
    rows = x.reshape(8, 8)
    per_row = plax.vmap(lambda r: jnp.sum(r ** 2) + r[0])(rows)
    np.testing.assert_allclose(np.asarray(per_row), (rows ** 2).sum(1) + rows[:, 0],
                               rtol=2e-5)
    per_example = plax.jit(plax.vmap(plax.grad(lambda w, r: jnp.sum(jnp.tanh(w * r))),
                                     in_axes=(None, 0)))(np.float32(0.5), rows)
    np.testing.assert_allclose(np.asarray(per_example),
                               (rows / np.cosh(0.5 * rows) ** 2).sum(1), rtol=1e-4, atol=2e-6)


def test_control_flow_on_the_chip():
    def body(carry, x):
        carry = carry * 0.5 + x
        return carry, carry

    xs = np.arange(10, dtype=np.float32)
    last, seen = plax.jit(lambda xs: lax.scan(body, np.float32(0), xs))(xs)
    want = []
    c = 0.0
    for x in xs:
        c = c * 0.5 + x
        want.append(c)
    np.testing.assert_allclose(np.asarray(seen), want, rtol=1e-6)
    assert float(last) == pytest.approx(want[-1], rel=1e-6)
    count = plax.jit(lambda n: lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 2),
                                              (0, 1)))(10)
    assert (int(count[0]), int(count[1])) == (10, 1024)
    pick = plax.jit(lambda p, v: lax.cond(p, jnp.sin, jnp.cos, v))
    assert float(pick(True, np.float32(1))) == pytest.approx(np.sin(1), rel=1e-6)
    assert float(pick(False, np.float32(1))) == pytest.approx(np.cos(1), rel=1e-6)


# --- narrow dtypes -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                                   ml_dtypes.float8_e5m2], ids=lambda t: np.dtype(t).name)
def test_narrow_floats_round_trip_exactly(dtype):
    values = np.linspace(-8, 8, 97, dtype=np.float32).astype(dtype)
    on_chip = plax.device_put(values)
    assert on_chip.dtype == np.dtype(dtype)
    assert np.asarray(on_chip).tobytes() == values.tobytes()
    back = plax.jit(lambda v: v.astype(jnp.float32) * 2)(on_chip)  # widened on the chip
    np.testing.assert_array_equal(np.asarray(back), values.astype(np.float32) * 2)
    narrowed = plax.jit(lambda v: (v / 2).astype(dtype))(back)  # narrowed there, exactly
    assert narrowed.dtype == np.dtype(dtype)
    assert np.asarray(narrowed).tobytes() == values.tobytes()


def test_bf16_matmul():
    a = _normal((256, 512)).astype(ml_dtypes.bfloat16)
    b = _normal((512, 128)).astype(ml_dtypes.bfloat16)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    out = plax.jit(jnp.matmul)(a, b)
    assert out.dtype == jnp.bfloat16
    assert _rel_err(out, exact) < 1e-2
    wide = plax.jit(lambda x, y: lax.dot(x, y, preferred_element_type=jnp.float32))(a, b)
    assert wide.dtype == np.float32
    assert _rel_err(wide, exact) < 1e-5  # bf16 products are exact in f32; f32 sums


# --- matmul precision --------------------------------------------------------------------------
def test_default_matmul_precision():
    a, b = _normal((512, 512)), _normal((512, 512))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    mm = plax.jit(jnp.matmul)
    err_default = _rel_err(mm(a, b), exact)
    assert 1e-4 < err_default < 2e-2  # one bf16 pass, as JAX's default on TPUs
    err_dot = _rel_err(plax.jit(lambda x, y: jnp.dot(x, y, precision="highest"))(a, b), exact)
    assert err_dot < 1e-5
    err_lax = _rel_err(plax.jit(lambda x, y: lax.dot(x, y, precision=lax.Precision.HIGHEST))(
        a, b), exact)
    assert err_lax < 1e-5
    err_high = _rel_err(plax.jit(lambda x, y: lax.dot(x, y, precision=lax.Precision.HIGH))(
        a, b), exact)
    assert err_high < err_default / 10  # three bf16 passes
    with plax.default_matmul_precision("highest"):
        err_context = _rel_err(plax.jit(lambda x, y: x @ y)(a, b), exact)
    assert err_context < 1e-5
    before = plax.config.jax_default_matmul_precision
    plax.config.update("jax_default_matmul_precision", "float32")
    try:
        err_config = _rel_err(plax.jit(lambda x, y: jnp.einsum("ij,jk->ik", x, y))(a, b), exact)
    finally:
        plax.config.update("jax_default_matmul_precision", before)
    assert err_config < 1e-5
    assert _rel_err(plax.jit(lambda x, y: x @ y + 0)(a, b), exact) == pytest.approx(
        err_default, rel=0.5)  # (the config is back to the default)


# --- linear algebra ----------------------------------------------------------------------------
def test_cholesky():
    spd = _spd(64, (3,))
    low = np.asarray(plax.jit(jnp.linalg.cholesky)(spd), np.float64)
    assert np.allclose(np.triu(low, 1), 0)
    assert _rel_err(low @ np.swapaxes(low, -1, -2), spd) < 1e-5
    assert _rel_err(low, np.linalg.cholesky(spd.astype(np.float64))) < 1e-4


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
def test_triangular_solve(left_side, lower):
    a = _normal((2, 32, 32)) + 32 * np.eye(32, dtype=np.float32)
    a = np.tril(a) if lower else np.triu(a)
    b = _normal((2, 32, 5) if left_side else (2, 5, 32))
    x = plax.jit(lambda a, b: lax.linalg.triangular_solve(a, b, left_side=left_side,
                                                          lower=lower))(a, b)
    x = np.asarray(x, np.float64)
    a64 = a.astype(np.float64)
    back = a64 @ x if left_side else x @ a64
    assert _rel_err(back, b) < 1e-5


def test_lu():
    a = _normal((2, 48, 48))
    lu, pivots, perm = plax.jit(lax.linalg.lu)(a)
    lu, perm = np.asarray(lu, np.float64), np.asarray(perm)
    low = np.tril(lu, -1) + np.eye(48)
    up = np.triu(lu)
    assert _rel_err(low @ up, np.take_along_axis(a, perm[..., None], axis=-2)) < 5e-5
    assert np.asarray(pivots).shape == (2, 48)
    assert sorted(perm[0]) == list(range(48))


def test_qr():
    a = _normal((2, 40, 24))
    q, r = plax.jit(jnp.linalg.qr)(a)
    q, r = np.asarray(q, np.float64), np.asarray(r, np.float64)
    assert q.shape == (2, 40, 24) and r.shape == (2, 24, 24)
    assert _rel_err(q @ r, a) < 5e-5
    assert np.abs(np.swapaxes(q, -1, -2) @ q - np.eye(24)).max() < 5e-5
    assert np.allclose(np.tril(r, -1), 0)


def test_eigh():
    h = _spd(48, (2,))
    w, v = plax.jit(jnp.linalg.eigh)(h)
    w, v = np.asarray(w, np.float64), np.asarray(v, np.float64)
    assert _rel_err(w, np.linalg.eigvalsh(h.astype(np.float64))) < 1e-4
    assert _rel_err((v * w[..., None, :]) @ np.swapaxes(v, -1, -2), h) < 1e-4


def test_svd():
    a = _normal((2, 40, 24))
    u, s, vh = plax.jit(lambda x: jnp.linalg.svd(x, full_matrices=False))(a)
    u, s, vh = (np.asarray(t, np.float64) for t in (u, s, vh))
    assert _rel_err(s, np.linalg.svd(a.astype(np.float64), compute_uv=False)) < 1e-4
    assert _rel_err((u * s[..., None, :]) @ vh, a) < 1e-4


def test_solve():
    a = _normal((3, 32, 32)) + 8 * np.eye(32, dtype=np.float32)
    b = _normal((3, 32, 4))
    x = plax.jit(jnp.linalg.solve)(a, b)
    assert _rel_err(x, np.linalg.solve(a.astype(np.float64), b.astype(np.float64))) < 5e-5


# --- nn ------------------------------------------------------------------------------------------
def test_sigmoid_and_silu():
    x = np.linspace(-10, 10, 1001, dtype=np.float32)
    sig = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(np.asarray(plax.jit(plax.nn.sigmoid)(x)), sig, rtol=2e-5,
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(plax.jit(plax.nn.silu)(x)), x * sig, rtol=2e-5,
                               atol=1e-6)
    d_silu = plax.jit(plax.vmap(plax.grad(plax.nn.silu)))(x)
    np.testing.assert_allclose(np.asarray(d_silu), sig * (1 + x * (1 - sig)), rtol=2e-5,
                               atol=1e-6)
    low = plax.jit(plax.nn.sigmoid)(x.astype(ml_dtypes.bfloat16))
    assert low.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(low, np.float64), sig, rtol=1e-2, atol=1e-2)


# --- host callbacks ----------------------------------------------------------------------------
def test_pure_callback():
    f = plax.jit(lambda x: plax.pure_callback(lambda v: np.asarray(v) ** 2,
                                              plax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1)
    x = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(f(x)), x ** 2 + 1)


def test_ordered_io_callback_runs_in_program_order():
    seen = []

    @plax.jit
    def f(x):
        plax.experimental.io_callback(lambda v: seen.append(int(v)), None, x, ordered=True)
        plax.experimental.io_callback(lambda v: seen.append(int(v) + 100), None, x,
                                      ordered=True)
        return x + 1

    for i in range(5):
        assert int(f(np.int32(i))) == i + 1
    plax.effects_barrier()
    assert seen == [v for i in range(5) for v in (i, i + 100)]


def test_debug_print_and_debug_callback(capfd):
    got = []

    @plax.jit
    def f(x):
        plax.debug.print("sum={s} first={f}", s=x.sum(), f=x[0])
        plax.debug.callback(lambda v: got.append(np.asarray(v)), x * 2)
        return x * 3

    np.testing.assert_array_equal(np.asarray(f(np.arange(4, dtype=np.float32))),
                                  3 * np.arange(4))
    plax.effects_barrier()
    assert capfd.readouterr().out == "sum=6.0 first=0.0\n"
    assert len(got) == 1
    np.testing.assert_array_equal(got[0], 2 * np.arange(4))
