"""The small public modules and names JAX code imports: typing, errors, dtypes, core, flatten_util,
versions, jacobian, typeof, print_saved_residuals, test_util."""
import functools
import importlib

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.test_util import check_grads
from plax.runtime.array import ArrayImpl


@pytest.mark.parametrize("name", ["typing", "errors", "dtypes", "core", "flatten_util",
                                  "tree_util", "stages", "test_util", "ad_checkpoint", "version"])
def test_submodules_are_importable_modules(name):
    module = importlib.import_module(f"plax.{name}")
    assert getattr(plax, name) is module
    assert module.__name__ == f"plax.{name}"


def test_version_tracks_the_mirrored_jax_api():
    assert plax.__version__ == "0.10.2"
    assert plax.__version_info__ == (0, 10, 2)
    assert plax.version.__version__ == plax.__version__
    major, minor = plax.__version_info__[:2]
    assert (major, minor) >= (0, 4)  # what libraries' `jax.__version__` checks ask


def test_typing_annotations():
    from plax.typing import ArrayLike, DTypeLike
    import typing
    members = typing.get_args(ArrayLike)
    assert plax.Array in members and np.ndarray in members and float in members
    assert np.dtype in typing.get_args(DTypeLike) and str in typing.get_args(DTypeLike)


def test_errors_module_names():
    from plax import errors
    for name in ["ConcretizationTypeError", "TracerBoolConversionError",
                 "TracerIntegerConversionError", "TracerArrayConversionError",
                 "UnexpectedTracerError", "NonConcreteBooleanIndexError", "JAXTypeError",
                 "JAXIndexError", "KeyReuseError", "JaxRuntimeError", "JaxprTypeError"]:
        assert isinstance(getattr(errors, name), type), name
    with pytest.raises(errors.ConcretizationTypeError, match="Abstract tracer value"):
        plax.jit(lambda x: bool(x > 0))(1.0)


def test_dtypes_module():
    from plax import dtypes
    assert dtypes.float0 == plax.float0
    assert dtypes.canonicalize_dtype(np.float64) == np.float32
    assert dtypes.result_type(np.int8, 1.5) == np.float32
    assert dtypes.result_type(np.float16, 1.5) == np.float16
    assert dtypes.scalar_type_of(np.int8) is int
    assert dtypes.scalar_type_of(jnp.ones(2, jnp.bfloat16)) is float
    assert dtypes.scalar_type_of(np.complex64) is complex
    assert dtypes.scalar_type_of(True) is bool
    assert dtypes.issubdtype(jnp.bfloat16, np.floating)
    assert dtypes.finfo(jnp.bfloat16).bits == 16 and dtypes.iinfo(np.int8).max == 127
    assert dtypes.itemsize_bits(jnp.int4) == 4


def test_core_public_names():
    from plax.core import (AbstractValue, ClosedJaxpr, Jaxpr, Primitive, ShapedArray, Trace,
                           Tracer, concrete_or_error, ensure_compile_time_eval, eval_jaxpr,
                           get_aval)
    import plax.core as core
    assert issubclass(ShapedArray, AbstractValue)
    aval = get_aval(np.ones((2, 3), np.float32))
    assert aval == ShapedArray((2, 3), np.float32)
    closed = plax.make_jaxpr(lambda x: jnp.sin(x) * 2)(np.ones(3, np.float32))
    assert isinstance(closed, ClosedJaxpr) and isinstance(closed.jaxpr, Jaxpr)
    out = eval_jaxpr(closed.jaxpr, closed.consts, np.arange(3.0, dtype=np.float32))
    np.testing.assert_allclose(np.asarray(out[0]), np.sin(np.arange(3.0)) * 2, rtol=1e-6)
    assert isinstance(closed.jaxpr.eqns[0].primitive, Primitive)
    assert closed.jaxpr.eqns[0].primitive.name == "sin"
    assert core.max_dim(3, 5) == 5 and core.min_dim(3, 5) == 3
    assert "ShapedArray" in dir(core)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        core.nope  # noqa: B018

    seen = []

    def f(x):
        seen.append(isinstance(x, Tracer) and isinstance(x._trace, Trace))
        with pytest.raises(plax.errors.ConcretizationTypeError, match="needed for the test"):
            concrete_or_error(float, x, "needed for the test")
        return x
    plax.jit(f)(1.0)
    assert seen == [True]
    assert concrete_or_error(int, 3.7) == 3 and concrete_or_error(None, "a") == "a"
    with ensure_compile_time_eval():
        assert float(jnp.ones(()) * 2) == 2.0


def test_eval_context_runs_eagerly_inside_a_trace():
    from plax.core import eval_context

    def f(x):
        with eval_context():
            c = jnp.arange(3.0) * 2  # concrete, even inside jit
        assert isinstance(c, plax.Array) and type(c) is ArrayImpl
        return x + c
    np.testing.assert_array_equal(np.asarray(plax.jit(f)(jnp.ones(3))), [1.0, 3.0, 5.0])


def test_ravel_pytree_round_trip_and_dtypes():
    from plax.flatten_util import ravel_pytree
    tree = {"a": jnp.ones((2, 2)), "b": (jnp.arange(3), 2.0)}
    flat, unravel = ravel_pytree(tree)
    assert flat.dtype == np.float32 and flat.shape == (8,)
    np.testing.assert_array_equal(np.asarray(flat), [1, 1, 1, 1, 0, 1, 2, 2])
    back = unravel(flat)
    assert back["b"][0].dtype == np.int32
    np.testing.assert_array_equal(np.asarray(back["b"][0]), [0, 1, 2])
    lone, unravel_lone = ravel_pytree(1.5)  # one weak scalar stays weak, as in JAX
    assert lone.weak_type and lone.shape == (1,) and float(unravel_lone(lone)) == 1.5
    assert not ravel_pytree([1.5, jnp.ones(1)])[0].weak_type
    empty, unravel_empty = ravel_pytree([])
    assert empty.shape == (0,) and empty.dtype == np.float32 and unravel_empty(empty) == []
    mixed, unravel_mixed = ravel_pytree([np.ones(2, np.float16), np.ones(1, np.int32)])
    assert mixed.dtype == np.float16
    assert [x.dtype for x in unravel_mixed(mixed)] == [np.float16, np.int32]
    with pytest.raises(TypeError, match="unravel function given array of dtype float32"):
        unravel_mixed(jnp.ones(3))
    with pytest.raises(ValueError, match=r"expected an array of shape \(8,\), got shape \(3,\)"):
        unravel(jnp.ones(3))


def test_ravel_pytree_under_grad_jit_and_vmap():
    from plax.flatten_util import ravel_pytree
    params = {"w": jnp.arange(4.0).reshape(2, 2), "b": jnp.ones(2)}
    g = plax.grad(lambda p: jnp.sum(ravel_pytree(p)[0] ** 2))(params)
    np.testing.assert_allclose(np.asarray(g["w"]), 2 * np.arange(4.0).reshape(2, 2))
    flat = plax.jit(lambda p: ravel_pytree(p)[0])(params)
    np.testing.assert_array_equal(np.asarray(flat), [1, 1, 0, 1, 2, 3])
    batched = plax.vmap(lambda v: ravel_pytree((v, v * 2))[0])(jnp.ones((3, 2)))
    assert batched.shape == (3, 4)
    check_grads(lambda p: jnp.tanh(ravel_pytree(p)[0]), (params,), order=2)


def test_jacobian_is_jacrev_and_typeof():
    # JAX 0.10's jacobian is a function of its own that calls jacrev
    assert plax.jacobian is not plax.jacrev and plax.jacobian.__name__ == "jacobian"
    x = np.array([0.5, -1.0], np.float32)
    j = plax.jacobian(lambda v: jnp.sin(v) * v)(x)
    np.testing.assert_allclose(np.asarray(j), np.diag(np.cos(x) * x + np.sin(x)), rtol=1e-6)
    assert plax.typeof(jnp.ones((2, 3))) == plax.core.ShapedArray((2, 3), np.float32)
    assert plax.typeof(2.0).weak_type


def test_print_saved_residuals(capsys):
    from plax.ad_checkpoint import print_saved_residuals, saved_residuals

    def f(x, y):
        a = jnp.sin(x)
        return jnp.sum(jnp.cos(a * y)) + jnp.sum(x * x)

    print_saved_residuals(f, jnp.ones(3), 2.0)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "f32[3] from the argument x"
    assert any(line.startswith("f32[3] output of sin from ") and "test_public_modules.py" in line
               and "(f)" in line for line in lines)
    print_saved_residuals(plax.checkpoint(f), jnp.ones(3), 2.0)
    assert capsys.readouterr().out.splitlines() == ["f32[3] from the argument x",
                                                    "f32[] from the argument y"]
    found = saved_residuals(lambda p: jnp.sum(p["w"] @ p["x"]),
                            {"w": jnp.ones((2, 3)), "x": jnp.ones(3)})
    assert [why for _, why in found] == ["from the argument p['w']", "from the argument p['x']"]


def _doc_page_loss(params, x, y):
    """The model of JAX's "Gradient checkpointing with jax.checkpoint" page."""
    from plax.ad_checkpoint import checkpoint_name
    *ws, w_last = params
    for i, w in enumerate(ws):
        x = jnp.sin(jnp.dot(w, x))
        x = checkpoint_name(x, name=f"layer{i}_output")
    return jnp.sum((jnp.dot(w_last, x) - y) ** 2)


_ARGS = ["f32[5,4] from the argument params[0]", "f32[6,5] from the argument params[1]",
         "f32[7,6] from the argument params[2]", "f32[4] from the argument x"]
_Y = "f32[7] from the argument y"
# policy -> what JAX 0.10.2 saves, in its order (without the source locations)
SAVED_BY_POLICY = {
    "none": [*_ARGS, "f32[5] output of cos", "f32[5] named 'layer0_output'",
             "f32[6] output of cos", "f32[6] named 'layer1_output'", "f32[7] output of mul"],
    "default": [*_ARGS, _Y],
    "nothing_saveable": [*_ARGS, _Y],
    "everything_saveable": [*_ARGS, "f32[5] output of cos", "f32[5] named 'layer0_output'",
                            "f32[6] output of cos", "f32[6] named 'layer1_output'",
                            "f32[7] output of mul"],
    "dots_saveable": [*_ARGS, _Y, *(f"f32[{n}] output of dot_general" for n in (5, 6, 7))],
    "dots_with_no_batch_dims_saveable": [
        *_ARGS, _Y, *(f"f32[{n}] output of dot_general" for n in (5, 6, 7))],
    "save_any_names_but_these": [*_ARGS, _Y, "f32[5] named 'layer0_output'"],
    "save_anything_except_these_names": [
        *_ARGS, "f32[5] output of cos", "f32[5] named 'layer0_output'", "f32[6] output of cos",
        "f32[6] named 'layer1_output'", "f32[7] output of mul"],
    "save_only_these_names": [*_ARGS, _Y, "f32[6] named 'layer1_output'"],
    "save_from_both_policies": [*_ARGS, _Y, "f32[5] output of dot_general",
                                "f32[5] named 'layer0_output'", "f32[6] output of dot_general",
                                "f32[7] output of dot_general"],
}


def _policy(name):
    p = plax.checkpoint_policies
    return {"save_any_names_but_these": lambda: p.save_any_names_but_these("layer1_output"),
            "save_anything_except_these_names":
                lambda: p.save_anything_except_these_names("layer1_output"),
            "save_only_these_names": lambda: p.save_only_these_names("layer1_output"),
            "save_from_both_policies": lambda: p.save_from_both_policies(
                p.dots_saveable, p.save_only_these_names("layer0_output"))}.get(
        name, lambda: getattr(p, name))()


@pytest.mark.parametrize("name", sorted(SAVED_BY_POLICY))
def test_each_checkpoint_policy_saves_what_jax_saves(name):
    from plax.ad_checkpoint import saved_residuals
    f = _doc_page_loss if name == "none" else plax.checkpoint(_doc_page_loss) \
        if name == "default" else plax.checkpoint(_doc_page_loss, policy=_policy(name))
    params = [jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6))]
    found = saved_residuals(f, params, jnp.ones(4), jnp.ones(7))
    got = [f"{aval.str_short()} {why.split(' from ')[0] if '.py:' in why else why}"
           for aval, why in found]
    assert got == SAVED_BY_POLICY[name]
    # a saved output names the user's line, column and function, as JAX does
    for _, why in found:
        if why.startswith(("output of", "named")):
            assert "test_public_modules.py:" in why and why.endswith("(_doc_page_loss)")
            assert why.split(" from ")[1].split(":")[2].split(" ")[0].isdigit()  # the column


def test_test_util_has_jax_signatures():
    from plax import test_util
    f = lambda x: jnp.sin(x) * x  # noqa: E731
    args = (np.array([0.3, 1.2], np.float32),)
    test_util.check_jvp(f, functools.partial(plax.jvp, f), args)
    test_util.check_vjp(f, functools.partial(plax.vjp, f), args)
    test_util.check_grads(f, args, order=2, modes=["fwd", "rev"])
    wrong_jvp = lambda primals, tangents: plax.jvp(lambda x: jnp.sin(x) * 2 * x, primals, tangents)  # noqa: E731
    with pytest.raises(AssertionError, match="JVP"):
        test_util.check_jvp(f, wrong_jvp, args)
    wrong_vjp = lambda *a: (f(*a), lambda ct: (ct * 3.0,))  # noqa: E731
    with pytest.raises(AssertionError, match="VJP does not agree"):
        test_util.check_vjp(f, wrong_vjp, args)


def test_lax_dtype_is_the_canonical_dtype_of_a_value():
    assert plax.lax.dtype(np.ones(2)) == np.float32  # float64 without x64
    assert plax.lax.dtype(3) == np.int32 and plax.lax.dtype(np.int8(3)) == np.int8
    with plax.enable_x64(True):
        assert plax.lax.dtype(np.ones(2)) == np.float64
