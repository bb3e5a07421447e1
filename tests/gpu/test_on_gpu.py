"""plax on an NVIDIA GPU through the CUDA plugin (marked ``gpu``: ``make gpu`` and
bench/gpu_check.sh run them; ``make test`` leaves them out, and without a GPU they skip,
saying why). Each answer is checked against NumPy on the host, or against the same program on
the CPU backend."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax, random
from plax.runtime import xla

pytestmark = pytest.mark.gpu

try:
    HAVE_GPU = "cuda" in xla.backends()
except RuntimeError:
    HAVE_GPU = False
GPU = plax.devices("gpu")[0] if HAVE_GPU else None
CPU = plax.devices("cpu")[0]
RNG = np.random.default_rng(0)
TOL = {np.float32: 2e-4, np.complex64: 2e-4, np.float64: 1e-10, np.complex128: 1e-10}


def _matrix(shape, dtype):
    x = RNG.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


def _close(got, want, dtype, scale=1.0):
    np.testing.assert_allclose(np.asarray(got), want, rtol=TOL[dtype] * scale,
                               atol=TOL[dtype] * scale)


@pytest.fixture(autouse=True)
def _on_a_gpu_with_x64():
    if not HAVE_GPU:
        pytest.skip("no GPU: plax started no CUDA backend here (install plax[cuda13] on a "
                    "machine with an NVIDIA GPU)")
    with plax.enable_x64(True):
        yield


# --- platform and placement -------------------------------------------------------------------
def test_the_gpu_is_the_default_and_the_cpu_stays_available():
    assert plax.default_backend() == "gpu"
    assert plax.devices()[0] == GPU and GPU.platform == "gpu"
    assert plax.devices("cuda") == plax.devices("gpu")
    assert CPU.platform == "cpu"
    assert (jnp.arange(4) * 2).devices() == {GPU}


def test_device_put_between_cpu_and_gpu():
    x = np.arange(12.0).reshape(3, 4)
    on_gpu = plax.device_put(x, GPU)
    on_cpu = plax.device_put(on_gpu * 2, CPU)
    assert on_gpu.devices() == {GPU} and on_cpu.devices() == {CPU}
    np.testing.assert_array_equal(np.asarray(on_cpu), 2 * x)
    back = plax.device_put(on_cpu + 1, GPU)
    np.testing.assert_array_equal(np.asarray(back), 2 * x + 1)


def test_jit_on_the_cpu_backend_alongside_gpu_arrays():
    x = jnp.arange(8.0)  # on the GPU (uncommitted)
    f = plax.jit(lambda v: jnp.sin(v) * 2, backend="cpu")
    out = f(x)
    assert out.devices() == {CPU}
    np.testing.assert_allclose(np.asarray(out), np.sin(np.arange(8.0)) * 2, rtol=1e-12)


# --- linear algebra through cuSOLVER ---------------------------------------------------------
DTYPES = [np.float32, np.complex64, np.float64, np.complex128]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (3, 40, 40)])
def test_cholesky(dtype, shape):
    a = _matrix(shape, dtype)
    spd = a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1], dtype=dtype)
    low = plax.jit(lax.linalg.cholesky)(spd)
    _close(low, np.linalg.cholesky(spd), dtype, scale=10)
    bad = plax.jit(lax.linalg.cholesky)(-np.eye(3, dtype=dtype))
    assert np.isnan(np.tril(np.asarray(bad))[np.tril_indices(3)]).all()  # (as JAX: NaN below)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(6, 6), (7, 4), (4, 7), (2, 30, 20)])
def test_lu(dtype, shape):
    a = _matrix(shape, dtype)
    lu, pivots, perm = plax.jit(lax.linalg.lu)(a)
    lu, perm = np.asarray(lu), np.asarray(perm)
    m, n = shape[-2:]
    k = min(m, n)
    low = np.tril(lu[..., :, :k], -1) + np.eye(m, k, dtype=dtype)
    up = np.triu(lu[..., :k, :])
    rows = np.take_along_axis(a, perm[..., :, None], axis=-2)
    _close(low @ up, rows, dtype, scale=50)
    assert np.asarray(pivots).shape == shape[:-2] + (k,)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(6, 6), (9, 4), (4, 9), (2, 50, 30)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr(dtype, shape, mode):
    a = _matrix(shape, dtype)
    q, r = plax.jit(lambda x: jnp.linalg.qr(x, mode=mode))(a)
    q, r = np.asarray(q), np.asarray(r)
    _close(q @ r, a, dtype, scale=50)
    eye = np.eye(q.shape[-1], dtype=dtype)
    _close(np.conj(np.swapaxes(q, -1, -2)) @ q, np.broadcast_to(eye, q.shape[:-2] + eye.shape),
           dtype, scale=50)
    assert np.allclose(np.tril(r, -1), 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (4, 64, 64)])
def test_eigh(dtype, shape):
    a = _matrix(shape, dtype)
    h = a + np.conj(np.swapaxes(a, -1, -2))
    w, v = plax.jit(jnp.linalg.eigh)(h)
    _close(w, np.linalg.eigvalsh(h), dtype, scale=50)
    v = np.asarray(v)
    recon = (v * np.asarray(w)[..., None, :]) @ np.conj(np.swapaxes(v, -1, -2))
    _close(recon, h, dtype, scale=100)


SVDS = [((6, 6), None), ((40, 25), None), ((25, 40), None), ((2, 70, 40), None),
        ((1100, 12), None), ((12, 1100), None), ((30, 20), "QR"), ((20, 30), "QR")]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,algorithm", SVDS)
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd(dtype, shape, algorithm, full_matrices):
    a = _matrix(shape, dtype)
    alg = None if algorithm is None else getattr(lax.linalg.SvdAlgorithm, algorithm)
    u, s, vh = plax.jit(lambda x: lax.linalg.svd(x, full_matrices=full_matrices,
                                                 algorithm=alg))(a)
    u, s, vh = map(np.asarray, (u, s, vh))
    want = np.linalg.svd(a, compute_uv=False)
    _close(s, want, dtype, scale=100)
    k = min(shape[-2:])
    recon = (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]
    _close(recon, a, dtype, scale=200)
    m, n = shape[-2:]
    assert u.shape[-2:] == ((m, m) if full_matrices else (m, k))
    assert vh.shape[-2:] == ((n, n) if full_matrices else (k, n))
    only = plax.jit(lambda x: lax.linalg.svd(x, compute_uv=False, algorithm=alg))(a)
    _close(only, want, dtype, scale=100)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a,conjugate_a", [(False, False), (True, False),
                                                     (True, True), (False, True)])
def test_triangular_solve(dtype, left_side, lower, transpose_a, conjugate_a):
    a = _matrix((2, 6, 6), dtype) + 6 * np.eye(6, dtype=dtype)
    a = np.tril(a) if lower else np.triu(a)
    b = _matrix((2, 6, 3) if left_side else (2, 3, 6), dtype)
    x = plax.jit(lambda a, b: lax.linalg.triangular_solve(
        a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
        conjugate_a=conjugate_a))(a, b)
    op = np.swapaxes(a, -1, -2) if transpose_a else a
    op = np.conj(op) if conjugate_a else op
    _close(op @ np.asarray(x) if left_side else np.asarray(x) @ op, b, dtype, scale=50)


def test_linalg_gradients_on_gpu_match_the_cpu():
    a = _matrix((5, 5), np.float64)
    spd = a @ a.T + 5 * np.eye(5)

    def loss(x):
        u, s, vh = jnp.linalg.svd(x @ x.T + 5 * jnp.eye(5))
        return (jnp.linalg.cholesky(x @ x.T + 5 * jnp.eye(5)).sum() + s.sum()
                + jnp.linalg.eigh(x + x.T)[0].sum() + jnp.linalg.slogdet(x)[1]
                + jnp.linalg.solve(x, jnp.ones(5)).sum())

    on_gpu = plax.jit(plax.grad(loss))(a)
    on_cpu = plax.jit(plax.grad(loss), backend="cpu")(a)
    np.testing.assert_allclose(np.asarray(on_gpu), np.asarray(on_cpu), rtol=1e-8, atol=1e-8)
    assert spd.shape == (5, 5)


# --- callbacks, random numbers ---------------------------------------------------------------
def test_python_callbacks_on_gpu():
    seen = []
    f = plax.jit(lambda x: plax.pure_callback(lambda v: np.asarray(v) ** 2,
                                              plax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1)
    np.testing.assert_allclose(np.asarray(f(jnp.arange(4.0))), np.arange(4.0) ** 2 + 1)

    @plax.jit
    def g(x):
        plax.experimental.io_callback(lambda v: seen.append(np.asarray(v)), None, x,
                                      ordered=True)
        plax.debug.print("x sums to {}", x.sum())
        return x * 3

    np.testing.assert_allclose(np.asarray(g(jnp.ones(3))), 3 * np.ones(3))
    plax.effects_barrier()
    assert len(seen) == 1 and np.allclose(seen[0], 1)


def test_random_bits_are_the_same_on_gpu_and_cpu():
    key = random.key(42)
    gpu_bits = plax.jit(lambda k: random.bits(k, (1000,)))(key)
    cpu_bits = plax.jit(lambda k: random.bits(k, (1000,)), backend="cpu")(key)
    np.testing.assert_array_equal(np.asarray(gpu_bits), np.asarray(cpu_bits))
    normal = np.asarray(plax.jit(lambda k: random.normal(k, (100_000,)))(key))
    assert abs(normal.mean()) < 0.02 and abs(normal.std() - 1) < 0.02


# --- precision and dtypes ----------------------------------------------------------------------
def test_bf16_and_f16_matmul_with_preferred_element_type():
    a, b = _matrix((64, 128), np.float32), _matrix((128, 32), np.float32)
    for dt in (jnp.bfloat16, jnp.float16):
        out = plax.jit(lambda x, y: lax.dot(x.astype(dt), y.astype(dt),
                                            preferred_element_type=jnp.float32))(a, b)
        assert out.dtype == np.float32
        want = np.asarray(a.astype(dt), np.float64) @ np.asarray(b.astype(dt), np.float64)
        np.testing.assert_allclose(np.asarray(out), want, rtol=2e-2, atol=2e-2)


def test_bf16_convolution_with_preferred_element_type():
    x = _matrix((2, 16, 16, 3), np.float32)
    w = _matrix((3, 3, 3, 8), np.float32)
    conv = lambda x, w, **kw: lax.conv_general_dilated(  # noqa: E731
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), **kw)
    got = plax.jit(lambda x, w: conv(x.astype(jnp.bfloat16), w.astype(jnp.bfloat16),
                                     preferred_element_type=jnp.float32))(x, w)
    want = plax.jit(lambda x, w: conv(x.astype(jnp.bfloat16).astype(jnp.float32),
                                      w.astype(jnp.bfloat16).astype(jnp.float32),
                                      precision="highest"), backend="cpu")(x, w)
    assert got.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-2, atol=2e-2)


def test_default_matmul_precision_highest_is_full_float32():
    a, b = _matrix((256, 256), np.float32), _matrix((256, 256), np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    with plax.default_matmul_precision("highest"):
        high = np.asarray(plax.jit(jnp.matmul)(a, b))
    default = np.asarray(plax.jit(jnp.matmul)(a, b))
    err_high = np.abs(high - exact).max() / np.abs(exact).max()
    err_default = np.abs(default - exact).max() / np.abs(exact).max()
    assert err_high < 1e-5
    assert err_default < 1e-2  # (TF32 on Ampere and later, as JAX's default)


def test_memory_analysis_on_gpu():
    compiled = plax.jit(lambda x: (x @ x.T).sum()).lower(jnp.ones((256, 128))).compile()
    stats = compiled.memory_analysis()
    assert stats.argument_size_in_bytes == 256 * 128 * 8
    assert stats.output_size_in_bytes == 8


# --- every transformation ----------------------------------------------------------------------
def test_transformations_compose_on_gpu():
    from plax.experimental.shard_map import shard_map
    from plax.sharding import Mesh, PartitionSpec as P

    def f(w, x):
        return jnp.tanh(x @ w).sum()

    w, x = _matrix((4, 3), np.float64), _matrix((5, 4), np.float64)
    g = plax.jit(plax.grad(f))(w, x)
    g_cpu = plax.jit(plax.grad(f), backend="cpu")(w, x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(g_cpu), rtol=1e-10)
    per_row = plax.vmap(plax.grad(f), in_axes=(None, 0))(w, x[:, None, :])
    np.testing.assert_allclose(np.asarray(per_row).sum(0), np.asarray(g), rtol=1e-10)
    total, _ = lax.scan(lambda c, r: (c + f(w, r[None]), None), 0.0, x)
    np.testing.assert_allclose(float(total), float(f(w, x)), rtol=1e-10)
    gpus = plax.devices("gpu")
    mesh = Mesh(np.array(gpus), ("d",))
    n = len(gpus)
    summed = plax.jit(shard_map(lambda v: lax.psum(v.sum(), "d"), mesh=mesh, in_specs=P("d"),
                                out_specs=P()))(jnp.arange(4.0 * n))
    assert float(summed) == sum(range(4 * n))
    mapped = plax.pmap(lambda v: lax.psum(v, "i"), axis_name="i")(jnp.ones((n, 3)))
    np.testing.assert_array_equal(np.asarray(mapped), n * np.ones((n, 3)))


def test_psend_and_precv_move_data_between_gpus():
    from plax.experimental.shard_map import shard_map
    from plax.sharding import Mesh, PartitionSpec as P

    gpus = plax.devices("gpu")
    if len(gpus) < 2:
        pytest.skip(f"psend/precv need two GPUs; this machine has {len(gpus)}")
    n = len(gpus)
    ring = [(i, (i + 1) % n) for i in range(n)]

    def body(x):
        token = lax.psend(x, "d", ring)
        return lax.precv(token, plax.ShapeDtypeStruct(x.shape, x.dtype), "d", ring)

    f = plax.jit(shard_map(body, mesh=Mesh(np.array(gpus), ("d",)), in_specs=P("d"),
                           out_specs=P("d")))
    x = np.arange(2.0 * n).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(f(x)), np.roll(x.reshape(n, 2), 1, 0).ravel())
