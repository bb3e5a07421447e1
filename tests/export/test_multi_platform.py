"""Export for several platforms at once (JAX's multi-platform export): ``@main`` takes the
index of the platform it runs on first, and each platform's lowering is chosen by it."""
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import export, lax

X = np.linspace(0.1, 0.9, 6, dtype=np.float32)
SQ = np.eye(3, dtype=np.float32) * 2 + np.arange(9, dtype=np.float32).reshape(3, 3) / 10


def _per_platform(x):
    return lax.platform_dependent(x, cpu=jnp.sin, tpu=jnp.cos, default=jnp.tan)


@pytest.mark.parametrize("platforms", [("cpu", "tpu"), ("tpu", "cpu"), ("cuda", "cpu", "tpu")])
def test_the_module_runs_the_branch_of_the_platform_it_runs_on(platforms):
    exp = export.export(plax.jit(_per_platform), platforms=list(platforms))(X)
    assert exp.platforms == platforms and exp.uses_global_constants
    text = exp.mlir_module()
    assert re.search(r'@main\(%arg0: tensor<i32> \{jax.global_constant = "_platform_index"\}',
                     text)
    # every platform's lowering is in the module; on the CPU its own one runs
    assert {"stablehlo.sine", "stablehlo.cosine"} <= set(re.findall(r"stablehlo\.\w+", text))
    np.testing.assert_allclose(exp.call(X), np.sin(X), rtol=1e-6)
    np.testing.assert_allclose(plax.jit(exp.call)(X), np.sin(X), rtol=1e-6)


def test_each_platform_gets_its_own_linear_algebra():
    exp = export.export(plax.jit(jnp.linalg.det), platforms=["tpu", "cpu"])(SQ)
    text = exp.mlir_module()
    assert "LuDecomposition" in text and "lapack_sgetrf_ffi" in text
    np.testing.assert_allclose(exp.call(SQ), np.linalg.det(SQ), rtol=1e-5)


def test_a_round_trip_through_bytes_and_the_vjp_keep_the_platforms():
    f = lambda x: jnp.sum(_per_platform(x) ** 2)
    exp = export.export(plax.jit(f), platforms=["tpu", "cpu"])(X)
    back = export.deserialize(exp.serialize(vjp_order=1))
    assert back.platforms == ("tpu", "cpu")
    np.testing.assert_allclose(back.call(X), np.sum(np.sin(X) ** 2), rtol=1e-6)
    np.testing.assert_allclose(plax.grad(back.call)(X), 2 * np.sin(X) * np.cos(X), rtol=1e-5)


def test_symbolic_shapes_for_several_platforms():
    (b,) = export.symbolic_shape("b")
    spec = plax.ShapeDtypeStruct((b,), np.float32)
    exp = export.export(plax.jit(lambda x: _per_platform(x) * 3),
                        platforms=["cpu", "tpu"])(spec)
    assert "jax.uses_shape_polymorphism = true" in exp.mlir_module()
    for n in (3, 6):
        np.testing.assert_allclose(exp.call(X[:n]), 3 * np.sin(X[:n]), rtol=1e-6)
    # called from inside another shape-polymorphic export, for several platforms again
    outer = export.export(plax.jit(lambda x: exp.call(x) * 2), platforms=["tpu", "cpu"])(spec)
    np.testing.assert_allclose(outer.call(X), 6 * np.sin(X), rtol=1e-6)


def test_a_platform_it_was_not_exported_for_is_refused():
    exp = export.export(plax.jit(_per_platform), platforms=["tpu", "cuda"])(X)
    with pytest.raises(ValueError, match=r"exported for platforms '\('tpu', 'cuda'\)' but it "
                                         r"is used on '\('cpu',\)'"):
        exp.call(X)
    with pytest.raises(ValueError, match="names a platform more than once"):
        export.export(plax.jit(jnp.sin), platforms=["cpu", "tpu", "cpu"])


def test_a_module_calling_a_multi_platform_one_says_it_uses_global_constants():
    exp = export.export(plax.jit(_per_platform), platforms=["tpu", "cpu"])(X)
    single = export.export(plax.jit(exp.call))(X)
    assert single.uses_global_constants
    assert "jax.uses_shape_polymorphism = true" in single.mlir_module().split("\n")[0]
    np.testing.assert_allclose(single.call(X), np.sin(X), rtol=1e-6)
    plain = export.export(plax.jit(jnp.sin))(X)
    assert not plain.uses_global_constants


def test_donation_must_be_supported_by_all_or_none_of_the_platforms():
    f = plax.jit(jnp.sin, donate_argnums=(0,))
    exp = export.export(f, platforms=["cpu", "tpu"])(X)
    np.testing.assert_allclose(plax.jit(lambda x: x + exp.call(x))(X), X + np.sin(X),
                               rtol=1e-6)
    with pytest.raises(NotImplementedError, match="either all or no lowering platforms should "
                                                  "support donation"):
        export.export(f, platforms=["cpu", "tpu", "other"])(X)
