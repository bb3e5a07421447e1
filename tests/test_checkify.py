"""plax.experimental.checkify: functionalized checks, against JAX 0.10's messages and rules."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental import checkify
from plax.test_util import check_grads

from helpers import C64, F32, x64_for

ALL = checkify.all_checks
F64 = np.dtype(np.float64)


def positive_log(x):
    checkify.check(jnp.all(x > 0), "x must be positive, got {} (first {first})", x, first=x[0])
    return jnp.log(x)


# --- the module and the error value ------------------------------------------------------------
def test_module_names_and_error_sets():
    assert sorted(checkify.__all__) == sorted([
        "Error", "ErrorCategory", "JaxRuntimeError", "all_checks", "automatic_checks", "check",
        "check_error", "checkify", "debug_check", "div_checks", "float_checks", "index_checks",
        "init_error", "nan_checks", "user_checks"])
    assert checkify.float_checks == checkify.nan_checks | checkify.div_checks
    assert checkify.automatic_checks == checkify.float_checks | checkify.index_checks
    assert ALL == checkify.automatic_checks | checkify.user_checks and len(ALL) == 4
    assert [c.__name__ for c in checkify.user_checks] == ["FailedCheckError"]
    assert issubclass(checkify.JaxRuntimeError, ValueError)
    assert issubclass(checkify.JaxRuntimeError, plax.errors.JaxRuntimeError)
    assert checkify.init_error.get() is None and str(checkify.init_error) == "Error(None)"


@pytest.mark.parametrize("jit", [False, True])
def test_user_check_message_shows_runtime_values(jit):
    f = checkify.checkify(positive_log)
    f = plax.jit(f) if jit else f
    err, out = f(jnp.array([2.0, -1.0]))
    assert err.get() == "x must be positive, got [ 2. -1.] (first 2.0) (`check` failed)"
    assert type(err.get_exception()).__name__ == "FailedCheckError"
    with pytest.raises(checkify.JaxRuntimeError, match=r"x must be positive, got \[ 2\. -1\.\]"):
        err.throw()
    np.testing.assert_allclose(np.asarray(out)[0], np.log(2.0), rtol=1e-6)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_no_error_gives_none_and_the_outputs(dtype):
    with x64_for(dtype):
        x = np.array([0.5, 1.5, 3.0], dtype)
        err, out = plax.jit(checkify.checkify(positive_log, errors=ALL))(jnp.asarray(x))
        assert err.get() is None and err.get_exception() is None
        assert err.throw() is None
        assert out.dtype == dtype
        np.testing.assert_allclose(np.asarray(out), np.log(x), rtol=1e-6)


def test_error_is_a_pytree_that_leaves_jit():
    err, _ = plax.jit(checkify.checkify(positive_log))(jnp.array([-1.0, 1.0]))
    leaves = plax.tree_util.tree_leaves(err)
    assert [np.shape(x) for x in leaves] == [(), (), (2,), ()]  # pred, code, payload {} {first}
    again = plax.tree_util.tree_map(lambda x: x, err)
    assert isinstance(again, checkify.Error) and again.get() == err.get()
    assert str(err).startswith("Error(x must be positive")


def test_check_outside_checkify():
    positive_log(jnp.array([1.0]))  # passes: nothing happens
    with pytest.raises(checkify.JaxRuntimeError, match=r"x must be positive, got \[-1\.\]"):
        positive_log(jnp.array([-1.0]))
    with pytest.raises(ValueError, match="Cannot abstractly evaluate a checkify.check which was "
                                         "not functionalized"):
        plax.jit(positive_log)(jnp.array([1.0]))
    with pytest.raises(checkify.JaxRuntimeError, match=r"no \(`check` failed\)"):
        checkify.check(False, "no")


def test_debug_check_runs_only_under_checkify():
    def f(x):
        checkify.debug_check(x > 0, "debug {}", x)
        return x * 2
    assert float(f(jnp.float32(-1.0))) == -2.0
    assert float(plax.jit(f)(jnp.float32(-1.0))) == -2.0
    err, _ = checkify.checkify(f)(jnp.float32(-1.0))
    assert err.get() == "debug -1.0 (`check` failed)"


def test_bad_arguments():
    with pytest.raises(TypeError, match="check takes a scalar pred as argument"):
        checkify.checkify(lambda x: checkify.check(x > 0, "m"))(jnp.ones(3))
    with pytest.raises(TypeError, match="debug_check takes a scalar pred as argument"):
        checkify.debug_check(jnp.int32(1), "m")
    with pytest.raises(TypeError, match="Formatting arguments to checkify.check need to be "
                                        "PyTrees of arrays, but got 1.5"):
        checkify.check(True, "m {}", 1.5)
    with pytest.raises(TypeError, match="check_error takes an Error as argument, got type "
                                        "<class 'int'>"):
        checkify.check_error(3)


# --- automatic checks ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F64, C64])
def test_nan_check_names_the_primitive(dtype):
    with x64_for(dtype):
        f = plax.jit(checkify.checkify(lambda x: jnp.sin(x) * 2, errors=checkify.nan_checks))
        x = jnp.asarray(np.array([1.0, np.inf], dtype))
        err, out = f(x)
        assert err.get() == "nan generated by primitive: sin."
        assert out.dtype == dtype
        err, out = f(jnp.asarray(np.array([1.0, 2.0], dtype)))
        assert err.get() is None
        np.testing.assert_allclose(np.asarray(out), 2 * np.sin(np.array([1.0, 2.0], dtype)),
                                   rtol=1e-6)


def test_nan_in_the_input_is_reported_too():
    # As JAX: an output with a NaN fails the check, wherever the NaN came from.
    err, _ = checkify.checkify(lambda x: x + 1, errors=checkify.nan_checks)(jnp.float32(np.nan))
    assert err.get() == "nan generated by primitive: add."


@pytest.mark.parametrize("dtype", [np.int32, F32])
def test_division_by_zero(dtype):
    f = plax.jit(checkify.checkify(lambda x, y: lax.div(x, y), errors=checkify.div_checks))
    x = jnp.asarray(np.array([4, 6], dtype))
    err, out = f(x, jnp.asarray(np.array([2, 3], dtype)))
    assert err.get() is None and out.tolist() == [2, 2]
    err, _ = f(x, jnp.asarray(np.array([2, 0], dtype)))
    assert err.get() == "division by zero"
    # x % 0 is not checked (as JAX: only div is)
    err, _ = plax.jit(checkify.checkify(lambda x, y: x % y, errors=ALL))(jnp.int32(3),
                                                                        jnp.int32(0))
    assert err.get() is None


def _oob(shape, index, axis, size):
    return (f"out-of-bounds indexing for array of shape {shape}: index {index} is out of bounds "
            f"for axis {axis} with size {size}. ")


@pytest.mark.parametrize("name, fn, args, want", [
    ("gather", lambda x, i: x[i, 1], (np.zeros((4, 3)), np.array([1, 7])), ((4, 3), 7, 0, 4)),
    ("gather negative", lambda x, i: x[i], (np.zeros(3), np.array([0, -5])), ((3,), -2, 0, 3)),
    ("dynamic_slice", lambda x, i: lax.dynamic_slice(x, (0, i), (2, 2)),
     (np.zeros((4, 3)), np.int32(2)), ((4, 3), 2, 1, 3)),
    ("dynamic_update_slice", lambda x, i: lax.dynamic_update_slice(x, jnp.ones(2), (i,)),
     (np.zeros(4), np.int32(3)), ((4,), 3, 0, 4)),
    ("scatter", lambda x, i: x.at[i].add(1.0), (np.zeros((4, 3)), np.array([1, 4])),
     ((4, 3), 4, 0, 4)),
])
def test_index_checks_report_index_axis_and_size(name, fn, args, want):
    f = plax.jit(checkify.checkify(fn, errors=checkify.index_checks))
    err, _ = f(*args)
    assert err.get() == _oob(*want)
    in_bounds = [np.zeros_like(a) for a in args]
    assert f(*in_bounds)[0].get() is None


def test_errors_selects_what_is_checked():
    def f(x):
        checkify.check(x < 0, "user {}", x)
        return jnp.log(x) / x
    x = jnp.float32(0.0)
    assert checkify.checkify(f)(x)[0].get() == "user 0.0 (`check` failed)"
    assert checkify.checkify(f, errors=checkify.nan_checks)(jnp.float32(-1.0))[0].get() == \
        "nan generated by primitive: log."
    assert checkify.checkify(f, errors=checkify.div_checks)(x)[0].get() == "division by zero"
    assert checkify.checkify(f, errors=checkify.index_checks)(x)[0].get() is None
    assert checkify.checkify(f, errors=checkify.nan_checks)(jnp.float32(1.0))[0].get() is None


def test_first_error_in_program_order_wins():
    def nan_first(x):
        y = jnp.sin(x)
        checkify.check(x < 0, "user {}", x)
        return y

    def user_first(x):
        checkify.check(x < 0, "user {}", x)
        checkify.check(x < -1, "second {}", x)
        return jnp.sin(x)

    inf = jnp.float32(np.inf)
    for wrap in (lambda f: f, plax.jit):  # checkify of f and checkify of jit(f), jitted
        first = plax.jit(checkify.checkify(wrap(nan_first), errors=ALL))
        assert first(inf)[0].get() == "nan generated by primitive: sin."
        first = plax.jit(checkify.checkify(wrap(user_first), errors=ALL))
        assert first(inf)[0].get() == "user inf (`check` failed)"
        assert first(jnp.float32(-0.5))[0].get() == "second -0.5 (`check` failed)"


# --- transformations ----------------------------------------------------------------------------
def test_checkify_of_jit_and_jit_of_checkify_agree():
    x = jnp.array([2.0, -3.0])
    inner = checkify.checkify(plax.jit(positive_log), errors=ALL)
    outer = plax.jit(checkify.checkify(positive_log, errors=ALL))
    nested = checkify.checkify(plax.jit(lambda x: plax.jit(positive_log)(x) + 1), errors=ALL)
    want = "x must be positive, got [ 2. -3.] (first 2.0) (`check` failed)"
    for f in (inner, outer, nested):
        err, out = f(x)
        assert err.get() == want
        assert np.isnan(np.asarray(out)[1])


def test_checkified_jit_is_traced_and_checkified_once():
    from plax.interpreters.checkify_rules import _checkified
    calls = []

    def f(x):
        calls.append(1)
        return jnp.log(x)
    jf = plax.jit(f)

    def g(x):
        checkify.check(x < 10, "big {}", x)  # an error before the jit: its codes differ per call
        return jf(x)
    g = checkify.checkify(g, errors=ALL)
    g(jnp.float32(1.0))
    known = len(_checkified)
    for v in (-1.0, 2.0, 20.0):
        g(jnp.float32(v))
    assert len(calls) == 1 and len(_checkified) == known
    assert g(jnp.float32(-1.0))[0].get() == "nan generated by primitive: log."
    assert g(jnp.float32(20.0))[0].get() == "big 20.0 (`check` failed)"


def test_vmap_of_checkified_reports_the_mapped_indices():
    f = plax.jit(plax.vmap(checkify.checkify(positive_log, errors=ALL)))
    err, _ = f(jnp.array([[1.0, 2.0], [-1.0, 1.0], [3.0, -2.0]]))
    assert err.get() == ("at mapped index 1: x must be positive, got [-1.  1.] (first -1.0) "
                         "(`check` failed)\nat mapped index 2: x must be positive, got [ 3. -2.] "
                         "(first 3.0) (`check` failed)")
    assert type(err.get_exception()).__name__ == "BatchedError"
    with pytest.raises(checkify.JaxRuntimeError, match=r"got \[ 3\. -2\.\]"):  # the last one
        err.throw()
    g = plax.jit(plax.vmap(checkify.checkify(lambda x, i: x[i], errors=checkify.index_checks),
                           (None, 0)))
    err, _ = g(jnp.arange(3.0), jnp.array([0, 5, 1]))
    assert err.get() == "at mapped index 1: " + _oob((3,), 5, 0, 3)


def test_checkify_of_vmap_and_check_under_vmap():
    xs = jnp.array([[1.0, 2.0], [-1.0, 1.0], [3.0, -2.0]])
    err, _ = plax.jit(checkify.checkify(plax.vmap(positive_log)))(xs)
    assert err.get() == "x must be positive, got [ 3. -2.] (first 3.0) (`check` failed)"
    with pytest.raises(checkify.JaxRuntimeError, match=r"got \[ 3\. -2\.\]"):
        plax.vmap(positive_log)(xs)


def test_scan_and_map():
    def body(c, x):
        checkify.check(x < 3, "x too big: {}", x)
        return c + jnp.log(x), c
    f = plax.jit(checkify.checkify(lambda xs: lax.scan(body, 0.0, xs), errors=ALL))
    err, (c, ys) = f(jnp.arange(1.0, 4.0))
    assert err.get() == "x too big: 3.0 (`check` failed)"
    err, (c, ys) = f(jnp.array([1.0, 2.0]))
    assert err.get() is None
    np.testing.assert_allclose(float(c), np.log(2.0), rtol=1e-6)
    assert f(jnp.array([1.0, -1.0]))[0].get() == "nan generated by primitive: log."
    err, _ = plax.jit(checkify.checkify(lambda xs: lax.map(lambda x: x[2 * x.astype(int)], xs),
                                        errors=checkify.index_checks))(jnp.ones((3, 2)))
    assert err.get() == _oob((2,), 2, 0, 2)


def test_while_and_fori_loops():
    def loop(x):
        def cond(c):
            checkify.check(c < 6, "cond saw {}", c)
            return c < 8

        def body(c):
            checkify.check(c < 4, "body saw {}", c)
            return c + 1
        return lax.while_loop(cond, body, x)
    f = plax.jit(checkify.checkify(loop))
    assert f(jnp.int32(0))[0].get() == "body saw 4 (`check` failed)"
    assert f(jnp.int32(7))[0].get() == "cond saw 7 (`check` failed)"  # the first test
    assert plax.jit(checkify.checkify(loop, errors=checkify.nan_checks))(jnp.int32(0))[0].get() \
        is None
    err, out = plax.jit(checkify.checkify(lambda n: lax.fori_loop(
        0, n, lambda i, c: (checkify.check(i < 3, "i is {}", i), c + i)[1], 0)))(jnp.int32(5))
    assert err.get() == "i is 3 (`check` failed)" and int(out) == 10


def test_cond_and_switch_check_the_branch_taken():
    def f(i, x):
        return lax.switch(i, [lambda x: x, jnp.log, lambda x: (checkify.check(x > 0, "b2 {}", x),
                                                             x)[1]], x)
    g = plax.jit(checkify.checkify(f, errors=ALL))
    assert g(0, jnp.float32(-1.0))[0].get() is None
    assert g(1, jnp.float32(-1.0))[0].get() == "nan generated by primitive: log."
    assert g(2, jnp.float32(-1.0))[0].get() == "b2 -1.0 (`check` failed)"
    h = plax.jit(checkify.checkify(lambda x: lax.cond(x > 0, jnp.sqrt, lambda x: x / x, x),
                                   errors=ALL))
    assert h(jnp.float32(4.0))[0].get() is None and float(h(jnp.float32(4.0))[1]) == 2.0
    assert h(jnp.float32(0.0))[0].get() == "division by zero"


def test_grad_is_checked_in_forward_and_derivative_code():
    f = plax.jit(checkify.checkify(plax.grad(jnp.sqrt), errors=ALL))
    err, g = f(jnp.float32(4.0))
    assert err.get() is None and float(g) == 0.25
    assert f(jnp.float32(0.0))[0].get() == "division by zero"  # in the derivative's 0.5 / sqrt
    assert f(jnp.float32(-1.0))[0].get() == "nan generated by primitive: sqrt."
    g = plax.jit(checkify.checkify(plax.grad(lambda x: plax.checkpoint(positive_log)(x).sum())))
    assert g(jnp.array([1.0, -1.0]))[0].get() == \
        "x must be positive, got [ 1. -1.] (first 1.0) (`check` failed)"


def test_derivatives_of_a_checkified_function():
    def f(x):
        checkify.check(jnp.all(x > -5), "low {}", x)
        return jnp.sin(x) * x
    checked = lambda x: checkify.checkify(f, errors=ALL)(x)[1]  # noqa: E731
    x = jnp.array([0.3, -1.2])
    check_grads(checked, (x,), order=1, modes=("fwd", "rev"))
    np.testing.assert_allclose(np.asarray(plax.grad(lambda x: checked(x).sum())(x)),
                               np.cos(np.asarray(x)) * np.asarray(x) + np.sin(np.asarray(x)),
                               rtol=1e-5)


def test_custom_jvp_and_custom_vjp_functions():
    @plax.custom_jvp
    def cj(x):
        return jnp.log(x)
    cj.defjvp(lambda p, t: (cj(p[0]), t[0] / p[0]))

    @plax.custom_vjp
    def cv(x):
        return jnp.sqrt(x)
    cv.defvjp(lambda x: (jnp.sqrt(x), x), lambda r, g: (g / r,))

    for fn, prim in ((cj, "log"), (cv, "sqrt")):
        err, _ = checkify.checkify(fn, errors=ALL)(jnp.float32(-1.0))
        assert err.get() == f"nan generated by primitive: {prim}."
        err, _ = plax.vmap(checkify.checkify(fn, errors=ALL))(jnp.array([1.0, -1.0]))
        assert err.get() == f"at mapped index 1: nan generated by primitive: {prim}."
        assert checkify.checkify(plax.grad(fn), errors=ALL)(jnp.float32(0.0))[0].get() == \
            "division by zero"  # the custom rule's division
        grad = plax.grad(lambda x: checkify.checkify(fn, errors=ALL)(x)[1])(jnp.float32(4.0))
        assert float(grad) == 0.25


def test_check_error_raises_again():
    def inner(x):
        checkify.check(x > 0, "inner {}", x)
        return x

    def outer(x):
        err, y = plax.jit(checkify.checkify(inner))(x)
        checkify.check_error(err)
        return y * 2
    assert float(outer(jnp.float32(1.0))) == 2.0
    with pytest.raises(checkify.JaxRuntimeError, match=r"inner -1\.0 \(`check` failed\)"):
        outer(jnp.float32(-1.0))
    err, out = checkify.checkify(outer)(jnp.float32(-1.0))
    assert err.get() == "inner -1.0 (`check` failed)" and float(out) == -2.0


def test_checkified_program_holds_no_check():
    jaxpr = plax.make_jaxpr(checkify.checkify(positive_log, errors=ALL))(jnp.ones(2))
    assert "check" not in str(jaxpr)
    staged = plax.make_jaxpr(positive_log)(jnp.ones(2))
    assert "check[debug=False]" in str(staged)


def test_checks_inside_pmap_and_shard_map_report_the_failing_devices():
    # As JAX: each device checks its block; the error names the failing devices by index.
    from plax.experimental import checkify as ck
    from plax.sharding import Mesh, PartitionSpec as P

    def f(x):
        ck.check(plax.numpy.all(x > 0), "neg")
        return plax.lax.pmean(x, "i")

    g = ck.checkify(plax.pmap(f, axis_name="i", devices=plax.devices()[:2]))
    err, out = g(np.arange(1.0, 3.0).reshape(2, 1))
    assert err.get() is None
    np.testing.assert_allclose(out.ravel(), [1.5, 1.5])
    err, _ = g(np.array([[1.0], [-1.0]]))
    assert err.get() == "at mapped index 1: neg (`check` failed)"
    mesh = Mesh(np.array(plax.devices()[:4]), ("i",))
    h = ck.checkify(plax.jit(plax.shard_map(f, mesh=mesh, in_specs=P("i"), out_specs=P())))
    err, out = h(np.array([1.0, 2.0, -3.0, -4.0]))
    assert err.get() == ("at mapped index 2: neg (`check` failed)\n"
                         "at mapped index 3: neg (`check` failed)")
    np.testing.assert_allclose(out, [-1.0])
    with pytest.raises(ck.JaxRuntimeError, match="neg"):
        err.throw()
