"""Transformations of pallas_call, as JAX's: JVP is one joint kernel and reverse mode of a
bare pallas_call raises (custom_vjp around kernels differentiates); vmap adds a grid axis."""
import functools

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu

call = functools.partial(pl.pallas_call, interpret=True)
F32 = jnp.float32


def _rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _sin_times(n=8, block=4):
    """o = sin(x) * y + program_id, over blocks of ``block``."""
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.sin(x_ref[...]) * y_ref[...] + pl.program_id(0)
    spec = pl.BlockSpec((block,), lambda i: (i,))
    return call(kernel, out_shape=plax.ShapeDtypeStruct((n,), F32), grid=(n // block,),
                in_specs=[spec, spec], out_specs=spec)


def _pallas_eqns(jaxpr):
    return [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "pallas_call"]


def test_jvp_is_one_joint_kernel():
    f = _sin_times()
    x, y, tx, ty = (_rand(8, s) for s in range(4))
    out, tan = plax.jvp(f, (x, y), (tx, ty))
    np.testing.assert_allclose(out, np.sin(x) * y + np.repeat([0.0, 1.0], 4), rtol=1e-6)
    np.testing.assert_allclose(tan, np.cos(x) * tx * y + np.sin(x) * ty, rtol=1e-5)
    jaxpr = plax.make_jaxpr(lambda *a: plax.jvp(f, a[:2], a[2:]))(x, y, tx, ty)
    (eqn,) = _pallas_eqns(jaxpr)
    gm = eqn.params["grid_mapping"]
    assert (gm.grid, gm.num_inputs, gm.num_outputs) == ((2,), 4, 2)


def test_jvp_carries_scratch_tangents_and_zero_integer_tangents():
    def kernel(x_ref, o_ref, n_ref, acc_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)
        acc_ref[...] += x_ref[...] ** 2
        o_ref[...] = acc_ref[...]
        n_ref[...] = (x_ref[...] > 0).astype(jnp.int32)
    f = call(kernel, out_shape=(plax.ShapeDtypeStruct((4,), F32),
                                plax.ShapeDtypeStruct((4,), jnp.int32)),
             grid=(3,), in_specs=[pl.BlockSpec((4,), lambda i: (i,))],
             out_specs=[pl.BlockSpec((4,), lambda i: (0,))] * 2,
             scratch_shapes=[pltpu.VMEM((4,), F32)])
    x, t = _rand(12), _rand(12, 1)
    (o, n), (to, tn) = plax.jvp(f, (x,), (t,))
    np.testing.assert_allclose(o, (x.reshape(3, 4) ** 2).sum(0), rtol=1e-5)
    np.testing.assert_allclose(to, (2 * x * t).reshape(3, 4).sum(0), rtol=1e-5)
    np.testing.assert_array_equal(n, x[8:] > 0)
    assert tn.dtype == plax.dtypes.float0


@pytest.mark.parametrize("mode", ["grad", "vjp", "linearize", "jit_grad"])
def test_reverse_mode_of_a_bare_pallas_call_raises(mode):
    f = _sin_times()
    x, y = _rand(8), _rand(8, 1)
    run = {"grad": lambda: plax.grad(lambda a: f(a, y).sum())(x),
           "vjp": lambda: plax.vjp(f, x, y),
           "linearize": lambda: plax.linearize(f, x, y),
           "jit_grad": lambda: plax.jit(plax.grad(lambda a: f(a, y).sum()))(x)}[mode]
    with pytest.raises(ValueError, match="Linearization failed to produce known values"):
        run()


def test_jvp_with_aliases_raises():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2
    f = call(kernel, out_shape=plax.ShapeDtypeStruct((8,), F32), input_output_aliases={0: 0})
    with pytest.raises(NotImplementedError, match="JVP with aliasing not supported"):
        plax.jvp(f, (_rand(8),), (_rand(8),))


def _square_kernels():
    """y = x**2 with a forward kernel and a backward kernel (g * 2x), as a custom_vjp."""
    spec = pl.BlockSpec((4,), lambda i: (i,))
    sds = plax.ShapeDtypeStruct((8,), F32)

    def fwd_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * x_ref[...]

    def bwd_kernel(x_ref, g_ref, dx_ref):
        dx_ref[...] = 2 * x_ref[...] * g_ref[...]
    forward = call(fwd_kernel, out_shape=sds, grid=(2,), in_specs=[spec], out_specs=spec)
    backward = call(bwd_kernel, out_shape=sds, grid=(2,), in_specs=[spec, spec],
                    out_specs=spec)

    @plax.custom_vjp
    def square(x):
        return forward(x)
    square.defvjp(lambda x: (forward(x), x), lambda x, g: (backward(x, g),))
    return square


@pytest.mark.parametrize("jit", [False, True])
def test_custom_vjp_around_forward_and_backward_kernels(jit):
    square = _square_kernels()
    loss = plax.grad(lambda x: (square(x) * jnp.arange(8.0)).sum())
    x = _rand(8)
    g = (plax.jit(loss) if jit else loss)(x)
    np.testing.assert_allclose(g, 2 * x * np.arange(8.0), rtol=1e-5)


def _kernel_multiply():
    """x * y by an elementwise kernel, differentiated by custom_vjp (backward: kernels too)."""
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] * y_ref[...]

    def mul(x, y):
        return call(kernel, out_shape=plax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)

    @plax.custom_vjp
    def multiply(x, y):
        return mul(x, y)
    multiply.defvjp(lambda x, y: (mul(x, y), (x, y)), lambda r, g: (mul(g, r[1]), mul(g, r[0])))
    return multiply


@pytest.mark.needs_devices(2)
@pytest.mark.parametrize("y_spec", ["split", "replicated"])
def test_kernel_results_vary_as_their_operands_under_checked_shard_map(y_spec):
    """Under shard_map(check_vma=True) a kernel's result varies over the axes of its
    operands, so a custom_vjp's cotangents are not psum'd as if it were replicated."""
    from plax.sharding import AxisType, PartitionSpec as P
    mesh = plax.make_mesh((2,), ("i",), axis_types=(AxisType.Auto,))
    multiply, x = _kernel_multiply(), _rand(8)
    y = _rand(8 if y_spec == "split" else 4, seed=1)
    types = []

    def body(a, b):
        out = multiply(a, b)
        types.append(str(plax.typeof(out)))
        return out
    f = plax.shard_map(body, mesh=mesh, in_specs=(P("i"), P("i") if y_spec == "split" else P()),
                       out_specs=P("i"), check_vma=True)
    model = (lambda a, b: a * b) if y_spec == "split" else (
        lambda a, b: (a.reshape(2, 4) * b).reshape(8))
    loss = lambda m: lambda a, b: jnp.sin(m(a, b)).sum()  # noqa: E731
    expect = plax.grad(loss(model), argnums=(0, 1))(x, y)
    for got in (plax.grad(loss(f), argnums=(0, 1))(x, y),
                plax.jit(plax.grad(loss(f), argnums=(0, 1)))(x, y)):
        for g, e in zip(got, expect):
            np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-5, atol=1e-6)
    assert types and all(t == "float32[4]{V:i}" for t in types)


def _grid_of(f, *args):
    (eqn,) = _pallas_eqns(plax.make_jaxpr(f)(*args))
    return eqn.params["grid_mapping"]


@pytest.mark.parametrize("in_axes", [(0, None), (1, None), (0, 0), (None, 1)])
def test_vmap_adds_a_leading_grid_axis(in_axes):
    f = _sin_times()
    x, y = _rand((3, 8)), _rand((3, 8), 1)
    args = [a if ax in (0, None) else a.T for a, ax in zip((x, y), in_axes)]
    args = [a[0] if ax is None else a for a, ax in zip(args, in_axes)]
    xs, ys = [np.broadcast_to(a, (3, 8)) if ax is None else (a if ax == 0 else a.T)
              for a, ax in zip(args, in_axes)]
    want = np.sin(xs) * ys + np.repeat([0.0, 1.0], 4)
    vf = plax.vmap(f, in_axes=in_axes)
    np.testing.assert_allclose(vf(*args), want, rtol=1e-6)
    gm = _grid_of(vf, *args)
    assert gm.grid == (3, 2)
    batched = [bm.block_shape for bm, ax in zip(gm.block_mappings, (*in_axes, 0))
               if ax is not None]
    assert all(None in shape for shape in batched)


def test_vmap_of_aliased_unbatched_input_broadcasts_it():
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] += y_ref[...]
    f = call(kernel, out_shape=plax.ShapeDtypeStruct((8,), F32), input_output_aliases={0: 0})
    x, ys = _rand(8), _rand((3, 8), 1)
    np.testing.assert_allclose(plax.vmap(f, in_axes=(None, 0))(x, ys), x + ys, rtol=1e-6)


def test_vmap_of_batched_scalar_prefetch_loops_over_the_batch():
    def kernel(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(2,),
        in_specs=[pl.BlockSpec((2, 4), lambda i, idx: (idx[i], 0))],
        out_specs=pl.BlockSpec((2, 4), lambda i, idx: (i, 0)))
    f = call(kernel, out_shape=plax.ShapeDtypeStruct((4, 4), F32), grid_spec=spec)
    idx = np.array([[1, 0], [0, 0], [1, 1]], np.int32)
    x = _rand((4, 4))
    out = plax.vmap(f, in_axes=(0, None))(idx, x)
    want = np.stack([np.concatenate([x[2 * a:2 * a + 2], x[2 * b:2 * b + 2]]) for a, b in idx])
    np.testing.assert_array_equal(out, want)
    one = plax.vmap(f, in_axes=(0, None))(idx[:1], x)
    np.testing.assert_array_equal(one, want[:1])


def _dynamic(x, n, interpret=True):
    """Blocks of 2 over a grid of ``n`` (traced) programs: x + program_id + 10 * n."""
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + pl.program_id(0) + 10 * pl.num_programs(0)
    spec = pl.BlockSpec((2,), lambda i: (pl.num_programs(0) - 1 - i,))
    return pl.pallas_call(kernel, out_shape=plax.ShapeDtypeStruct((8,), F32), grid=(n,),
                          in_specs=[spec], out_specs=spec, interpret=interpret)(x)


def _want_dynamic(x, n):
    out = np.full(8, np.nan, np.float32)
    for i in range(n):
        b = n - 1 - i
        out[2 * b:2 * b + 2] = x[2 * b:2 * b + 2] + i + 10 * n
    return out


def test_dynamic_grid_sizes_under_jit_jvp_and_vmap():
    x = _rand(8)
    f = plax.jit(_dynamic)
    for n in (2, 4):
        np.testing.assert_allclose(f(x, n), _want_dynamic(x, n), rtol=1e-6)
    _, t = plax.jvp(lambda a: f(a, 3), (x,), (np.ones(8, np.float32),))
    np.testing.assert_array_equal(np.isnan(t), np.isnan(_want_dynamic(x, 3)))
    sizes = np.array([1, 4], np.int32)
    out = plax.vmap(f, in_axes=(None, 0))(x, sizes)
    np.testing.assert_allclose(out, np.stack([_want_dynamic(x, n) for n in sizes]), rtol=1e-6)
    # (compiled, it is a TPU kernel: tests/pallas/test_mosaic_tpu_lowering.py lowers one)
    with pytest.raises(ValueError, match="Only interpret mode is supported on CPU backend"):
        plax.jit(functools.partial(_dynamic, interpret=False))(x, 2)
