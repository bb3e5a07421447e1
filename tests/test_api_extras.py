"""Small top-level functions JAX programs use: process queries, host copies, environment
information, config context managers, and the sharding names at the top level."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp


def test_process_queries_in_one_process():
    assert plax.process_indices() == [0]
    assert plax.host_count() == plax.process_count() == 1
    assert plax.host_id() == plax.process_index() == 0
    assert plax.host_ids() == [0]


def test_copy_to_host_async_returns_its_argument_and_values_read_back():
    tree = {"a": jnp.arange(3.0), "b": [jnp.ones(2), 5]}
    assert plax.copy_to_host_async(tree) is tree
    np.testing.assert_array_equal(np.asarray(tree["a"]), [0.0, 1.0, 2.0])


def test_print_environment_info(capsys):
    text = plax.print_environment_info(return_string=True)
    assert text.splitlines()[0] == f"plax:    {plax.__version__}"
    assert f"devices: {plax.device_count()} (cpu)" in text
    assert plax.print_environment_info() is None
    assert capsys.readouterr().out.strip() == text


def test_threefry_partitionable_context_manager_changes_the_bits():
    key = plax.random.PRNGKey(0)
    with plax.threefry_partitionable(False):
        old = np.asarray(plax.random.split(key)[0])
    new = np.asarray(plax.random.split(key)[0])
    np.testing.assert_array_equal(old, [4146024105, 967050713])  # JAX's original layout
    np.testing.assert_array_equal(new, [1797259609, 2579123966])
    assert plax.config.jax_threefry_partitionable is True


def test_check_tracer_leaks_context_managers():
    with plax.check_tracer_leaks():
        assert plax.config.jax_check_tracer_leaks is True
    with plax.checking_leaks():
        assert plax.config.jax_check_tracer_leaks is True
    assert plax.config.jax_check_tracer_leaks is False


def test_sharding_names_at_the_top_level():
    mesh = plax.make_mesh((8,), ("x",))
    x = plax.device_put(np.arange(8.0), plax.NamedSharding(mesh, plax.P("x")))
    assert x.sharding.spec == plax.P("x")
    shard = x.addressable_shards[3]
    assert isinstance(shard, plax.Shard) and shard.index == (slice(3, 4),)
    with pytest.raises(TypeError, match="PartitionSpec entries must be None"):
        plax.P(1)


def test_custom_gradient_uses_the_returned_vjp():
    @plax.custom_gradient
    def f(x):
        return jnp.sin(x), lambda g: (g * jnp.cos(x) * 2,)

    assert float(f(1.0)) == pytest.approx(np.sin(1.0), rel=1e-6)
    assert float(plax.grad(f)(1.0)) == pytest.approx(2 * np.cos(1.0), rel=1e-6)
    assert float(plax.jit(plax.grad(f))(1.0)) == pytest.approx(2 * np.cos(1.0), rel=1e-6)
    np.testing.assert_allclose(np.asarray(plax.vmap(plax.grad(f))(jnp.arange(3.0))),
                               2 * np.cos(np.arange(3.0)), rtol=1e-6)


def test_custom_gradient_of_two_arguments_and_a_clipped_gradient():
    @plax.custom_gradient
    def g(x, y):
        return x * y, lambda c: (c * y, c * x * 10)

    gx, gy = plax.grad(g, argnums=(0, 1))(2.0, 3.0)
    assert (float(gx), float(gy)) == (3.0, 20.0)

    @plax.custom_gradient
    def clip_grad(x):
        return x, lambda g: (jnp.clip(g, -1, 1),)

    np.testing.assert_array_equal(
        np.asarray(plax.grad(lambda x: (clip_grad(x) * 5).sum())(jnp.ones(3))), [1.0, 1.0, 1.0])


def test_custom_gradient_vjp_may_return_the_one_cotangent_bare():
    # (as in JAX: one argument, its cotangent returned as an array rather than a tuple)
    @plax.custom_gradient
    def f(x):
        return x ** 2, lambda g: g * 3 * x

    assert float(plax.grad(f)(2.0)) == 6.0
    np.testing.assert_array_equal(plax.grad(lambda x: f(x).sum())(jnp.ones(3)), [3.0] * 3)


def test_custom_gradient_vjp_must_return_one_cotangent_per_argument():
    @plax.custom_gradient
    def bad(x, y):
        return x + y, lambda c: (c,)

    with pytest.raises(TypeError, match="returned 1 cotangents for 2 positional arguments"):
        plax.grad(bad)(1.0, 2.0)
