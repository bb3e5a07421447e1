"""plax.export: export a jitted function, call it (eagerly, under jit, vmap and grad), and
the VJPs it carries."""
import collections

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import export


def _f(x, y):
    return jnp.sin(x) * y, x.sum()


X = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
Y = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)


def _expected(x, y):
    return np.sin(x) * y, x.sum()


@pytest.fixture(scope="module")
def exp():
    return export.export(plax.jit(_f))(X, plax.ShapeDtypeStruct((3, 4), np.float32))


def test_exported_describes_the_function(exp):
    assert exp.fun_name == "_f"
    assert exp.in_tree == plax.tree_util.tree_structure(((1, 2), {}))
    assert exp.out_tree == plax.tree_util.tree_structure((1, 2))
    assert [a.str_short() for a in exp.in_avals] == ["f32[3,4]", "f32[3,4]"]
    assert [a.str_short() for a in exp.out_avals] == ["f32[3,4]", "f32[]"]
    assert exp.in_shardings_hlo == (None, None) and exp.out_shardings_hlo == (None, None)
    assert exp.nr_devices == 1 and exp.platforms == ("cpu",)
    assert export.minimum_supported_calling_convention_version <= \
        exp.calling_convention_version <= export.maximum_supported_calling_convention_version
    assert "func.func public @main(%arg0: tensor<3x4xf32>" in exp.mlir_module()
    assert bytes(exp.mlir_module_serialized[:4]) == b"ML\xefR"  # MLIR bytecode
    assert exp.in_shardings_jax(None) == (None, None)
    assert export.default_export_platform() == "cpu"


@pytest.mark.parametrize("how", ["eager", "jit", "jit_inside"])
def test_call_gives_the_function_values(exp, how):
    call = {"eager": exp.call, "jit": plax.jit(exp.call),
            "jit_inside": plax.jit(lambda x, y: exp.call(x, y * 1.0))}[how]
    got = call(X, Y)
    want = _expected(X, Y)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


def test_call_is_one_equation_under_make_jaxpr(exp):
    text = str(plax.make_jaxpr(exp.call)(X, Y))
    assert "call_exported" in text and "sin" not in text


def test_vmap_loops_over_the_batch(exp):
    xs = np.stack([X, X + 1, X - 2])
    got0, got1 = plax.vmap(exp.call, in_axes=(0, None))(xs, Y)
    for i in range(3):
        np.testing.assert_allclose(got0[i], np.sin(xs[i]) * Y, rtol=1e-6)
        np.testing.assert_allclose(got1[i], xs[i].sum(), rtol=1e-6)


def test_grad_uses_the_exported_vjp(exp):
    g = plax.grad(lambda x, y: exp.call(x, y)[0].sum() + exp.call(x, y)[1])(X, Y)
    np.testing.assert_allclose(g, np.cos(X) * Y + 1, rtol=1e-5)
    assert exp.has_vjp()
    v = exp.vjp()
    assert [a.str_short() for a in v.in_avals] == ["f32[3,4]"] * 3 + ["f32[]"]
    assert [a.str_short() for a in v.out_avals] == ["f32[3,4]", "f32[3,4]"]


@pytest.mark.parametrize("args, match", [
    ((np.ones((4, 4), np.float32), Y), r"Shape mismatch for args\[0\]\.shape\[0\]"),
    ((X.astype(np.int32), Y), r"Dtype mismatch for args\[0\]: expected float32"),
    ((X,), "must have the same pytree structure"),
    ((X[0], Y), r"Rank mismatch for args\[0\]"),
])
def test_call_refuses_other_arguments(exp, args, match):
    with pytest.raises(ValueError, match=match):
        exp.call(*args)


def test_pytree_arguments_and_keywords():
    Point = collections.namedtuple("Point", "a b")

    def f(p, *, scale):
        return {"sum": p[0] + p[1]["w"], "scaled": scale * p[1]["w"]}
    e = export.export(plax.jit(f))((np.ones(2, np.float32), {"w": np.ones(2, np.float32)}),
                                   scale=np.float32(3))
    out = e.call((np.array([1., 2.], np.float32), {"w": np.array([3., 4.], np.float32)}),
                 scale=np.float32(2))
    np.testing.assert_allclose(out["sum"], [4, 6])
    np.testing.assert_allclose(out["scaled"], [6, 8])
    del Point


def test_closed_over_constants_are_in_the_module():
    c = np.arange(4, dtype=np.float32)
    e = export.export(plax.jit(lambda x: x * c))(np.ones(4, np.float32))
    np.testing.assert_allclose(e.call(np.full(4, 2, np.float32)), 2 * c)


def test_export_needs_a_jitted_function():
    with pytest.raises(ValueError, match="must be the result of `jit`"):
        export.export(lambda x: x)


def test_exported_for_another_platform_is_refused_on_cpu():
    e = export.export(plax.jit(jnp.sin), platforms=["cuda"])(np.ones(2, np.float32))
    assert e.platforms == ("cuda",)
    with pytest.raises(ValueError, match=r"was exported for platforms '\('cuda',\)' but it "
                                         r"is used on '\('cpu',\)'"):
        e.call(np.ones(2, np.float32))
    lenient = export.export(plax.jit(jnp.sin), platforms=["cuda"],
                            disabled_checks=[export.DisabledSafetyCheck.platform()])(
        np.ones(2, np.float32))
    np.testing.assert_allclose(lenient.call(np.ones(2, np.float32)), np.sin(np.ones(2)),
                               rtol=1e-6)


def test_forward_mode_is_refused_as_in_jax(exp):
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        plax.jvp(lambda x: exp.call(x, Y)[0], (X,), (X,))


def test_an_export_calling_an_export_can_itself_be_called_in_an_export():
    inner = export.export(plax.jit(jnp.sin))(X3 := np.arange(4, dtype=np.float32))
    middle = export.export(plax.jit(lambda x: jnp.cos(inner.call(inner.call(x)))))(X3)
    middle = export.deserialize(middle.serialize())
    outer = export.export(plax.jit(lambda x: middle.call(x) + middle.call(2 * x)))(X3)
    want = np.cos(np.sin(np.sin(X3))) + np.cos(np.sin(np.sin(2 * X3)))
    np.testing.assert_allclose(outer.call(X3), want, rtol=1e-6)
    np.testing.assert_allclose(plax.jit(outer.call)(X3), want, rtol=1e-6)


def test_lowering_rules_can_be_overridden_for_one_export():
    from plax import lax
    from plax.interpreters import mlir

    def cosine(ctx, x, **_):
        return [mlir.hlo.cosine(x)]
    x = np.float32(0.5)
    exp = export.export(plax.jit(jnp.sin), _override_lowering_rules=((lax.sin_p, cosine),))(x)
    assert "stablehlo.cosine" in exp.mlir_module()
    np.testing.assert_allclose(exp.call(x), np.cos(x), rtol=1e-6)
    # the registered rule is untouched
    assert "stablehlo.sine" in export.export(plax.jit(jnp.sin))(x).mlir_module()
