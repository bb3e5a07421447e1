"""plax.numpy.error_checks: errors recorded while programs run, raised by raise_if_error."""
import operator
import threading
import traceback

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.numpy import error_checks as ec
from plax.sharding.named import NamedSharding
from plax.sharding.partition_spec import PartitionSpec as P

JaxValueError = ec.JaxValueError


@pytest.fixture(autouse=True)
def _clear_state():
    try:
        ec.raise_if_error()
    except JaxValueError:
        pass
    yield
    try:
        ec.raise_if_error()
    except JaxValueError:
        pass


def _no_error():
    ec.raise_if_error()  # raises if an error was recorded


def _flag_if_negative(x):
    ec.set_error_if(x < 0, "negative value")
    return x * 2


# Where set_error_if may be called: each runs _flag_if_negative on a vector whose entry
# ``v`` decides whether the error is recorded.
PLACES = {
    "eager": lambda v: _flag_if_negative(jnp.array([1.0, v])),
    "jit": lambda v: plax.jit(_flag_if_negative)(jnp.array([1.0, v])),
    "grad": lambda v: plax.grad(lambda x: _flag_if_negative(x).sum())(jnp.array([1.0, v])),
    "jit_grad": lambda v: plax.jit(plax.grad(lambda x: _flag_if_negative(x).sum()))(
        jnp.array([1.0, v])),
    "scan": lambda v: lax.scan(lambda c, x: (c, _flag_if_negative(x)), 0.0,
                               jnp.array([1.0, v])),
    "cond": lambda v: lax.cond(True, _flag_if_negative, lambda x: x, jnp.array([1.0, v])),
    "fori_loop": lambda v: lax.fori_loop(0, 2, lambda i, x: _flag_if_negative(x),
                                         jnp.array([1.0, v])),
    "checkpoint": lambda v: plax.grad(lambda x: plax.checkpoint(_flag_if_negative)(x).sum())(
        jnp.array([1.0, v])),
    "vmap": lambda v: plax.vmap(_flag_if_negative)(jnp.array([1.0, v])),
    "jit_vmap": lambda v: plax.jit(plax.vmap(_flag_if_negative))(jnp.array([1.0, v])),
}


@pytest.mark.parametrize("place", sorted(PLACES))
def test_set_error_if_is_raised_later(place):
    PLACES[place](2.0)
    _no_error()
    PLACES[place](-2.0)
    with pytest.raises(JaxValueError, match="negative value"):
        ec.raise_if_error()
    _no_error()  # raising cleared it


def test_first_error_wins_and_pred_may_be_any_array_like():
    ec.set_error_if(jnp.array([0, 3]), "first")  # nonzero counts as true
    ec.set_error_if(True, "second")
    with pytest.raises(JaxValueError, match="^first$"):
        ec.raise_if_error()
    ec.set_error_if(np.zeros((2, 2), bool), "never")
    _no_error()


def test_traceback_points_at_the_call_site():
    def where_it_is_set(x):
        ec.set_error_if(x > 0, "positive")
        return x
    plax.jit(where_it_is_set)(1.0)
    with pytest.raises(JaxValueError, match="positive") as info:
        ec.raise_if_error()
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames[-1].name == "where_it_is_set" and "set_error_if" in frames[-1].line


def test_raise_if_error_refuses_traced_code_and_bad_messages():
    ec.set_error_if(False, "x")
    with pytest.raises(ValueError, match="should not be called within a traced context"):
        plax.jit(lambda: ec.raise_if_error())()
    with pytest.raises(TypeError, match="msg must be a str"):
        ec.set_error_if(True, 3)


def test_states_are_per_thread():
    seen = []

    def worker():
        ec.set_error_if(True, "in the thread")
        try:
            ec.raise_if_error()
        except JaxValueError as e:
            seen.append(str(e))
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == ["in the thread"]
    _no_error()


# --- plax.numpy's checks -------------------------------------------------------------------
NAN_CASES = [  # (function, arguments that give a NaN in NumPy, arguments that do not)
    (jnp.arccos, (2.0,), (0.5,)), (jnp.acos, (2.0,), (0.5,)), (jnp.arccosh, (0.5,), (2.0,)),
    (jnp.arcsin, (-2.0,), (0.5,)), (jnp.arctanh, (-2.0,), (0.5,)), (jnp.cos, (np.inf,), (1.0,)),
    (jnp.sin, (np.inf,), (1.0,)), (jnp.tan, (np.inf,), (1.0,)), (jnp.log, (-1.0,), (1.0,)),
    (jnp.log2, (-1.0,), (1.0,)), (jnp.log10, (-1.0,), (1.0,)), (jnp.log1p, (-1.5,), (1.0,)),
    (jnp.sqrt, (-4.0,), (4.0,)), (jnp.add, (np.inf, -np.inf), (0.0, 0.0)),
    (jnp.subtract, (np.inf, np.inf), (0.0, 0.0)), (jnp.divide, (0.0, 0.0), (1.0, 1.0)),
    (jnp.power, (-1.0, 0.5), (1.0, 1.0)), (jnp.float_power, (-1.0, 0.5), (1.0, 1.0)),
    (jnp.fmod, (1.0, 0.0), (1.0, 1.0)), (jnp.remainder, (1.0, 0.0), (1.0, 1.0)),
    (jnp.divmod, (1.0, 0.0), (1.0, 1.0)), (operator.add, (np.inf, -np.inf), (0.0, 0.0)),
    (operator.truediv, (0.0, 0.0), (1.0, 1.0)), (operator.pow, (-1.0, 0.5), (1.0, 1.0)),
]


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("fn,bad,good", NAN_CASES,
                         ids=[f[0].__name__ for f in NAN_CASES])
def test_nan_checks(fn, bad, good, jit):
    f = plax.jit(fn) if jit else fn
    with np.errstate(all="ignore"):  # the cases are chosen by NumPy's answers
        assert np.isnan(np.asarray(fn(*map(np.float32, bad)))).any()
        assert not np.isnan(np.asarray(fn(*map(np.float32, good)))).any()
    bad, good = [jnp.float32(a) for a in bad], [jnp.float32(a) for a in good]
    f(*bad)  # checks are off by default
    _no_error()
    with ec.error_checking_behavior(nan="raise"):
        f(*good)
        _no_error()
        f(*bad)
        with pytest.raises(JaxValueError, match="NaN encountered"):
            ec.raise_if_error()
    f(*bad)  # off again: the flag is part of the jit's cache key
    _no_error()


DIVISIONS = [(jnp.true_divide, np.float32), (jnp.floor_divide, np.int32),
             (jnp.floor_divide, np.uint8), (jnp.remainder, np.int16),
             (jnp.remainder, np.float32), (jnp.divmod, np.int32), (jnp.divmod, np.float32),
             (operator.mod, np.int32), (operator.truediv, np.float32)]


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("fn,dtype", DIVISIONS, ids=[f"{f.__name__}-{np.dtype(d).name}"
                                                      for f, d in DIVISIONS])
def test_division_by_zero_checks(fn, dtype, jit):
    f = plax.jit(fn) if jit else fn
    one, zero = jnp.array(1, dtype), jnp.array(0, dtype)
    with ec.error_checking_behavior(divide="raise"):
        f(one, one)
        _no_error()
        f(one, zero)
        with pytest.raises(JaxValueError, match="Division by zero encountered"):
            ec.raise_if_error()
    # a category given beats `all`
    with ec.error_checking_behavior(all="raise", divide="ignore", nan="ignore"):
        f(one, zero)
        _no_error()


OOB_INDICES = [  # (operand shape, index): an error exactly where NumPy raises IndexError
    ((10,), np.array([1, -2])), ((10,), np.array([1, 10])), ((10,), np.array([-11])),
    ((10, 2), np.array([5])), ((10, 2), (np.array([5]), np.array([2]))),
    ((10, 2), (np.array([9]), np.array([-2]))), ((3, 4), (slice(None), np.array([4, 0]))),
]


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("shape,index", OOB_INDICES)
def test_out_of_bounds_gather_checks(shape, index, jit):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    try:
        x[index]
        expected = False
    except IndexError:
        expected = True
    index = tuple(jnp.asarray(i) if isinstance(i, np.ndarray) else i for i in index) \
        if isinstance(index, tuple) else jnp.asarray(index)
    with ec.error_checking_behavior(oob="raise"):
        (plax.jit(lambda x: x[index]) if jit else lambda x: x[index])(jnp.asarray(x))
        if expected:
            with pytest.raises(JaxValueError, match="Out of bounds encountered"):
                ec.raise_if_error()
        _no_error()
        jnp.zeros(1)[None]  # no gather, no check
        _no_error()


def test_categories_and_behaviors():
    with ec.error_checking_behavior(oob="raise"):
        ec.set_error_if_with_category(jnp.array(True), "oob!", category="oob")
        with pytest.raises(JaxValueError, match="oob!"):
            ec.raise_if_error()
    ec.set_error_if_with_category(jnp.array(True), "ignored", category="oob")
    _no_error()
    for category, match in [("nan", "nan is deprecated"), ("divide", "divide is deprecated"),
                            ("bogus", "Invalid category")]:
        with pytest.raises(ValueError, match=match):
            ec.set_error_if_with_category(jnp.array(True), "m", category=category)
    with pytest.raises(ValueError, match="expected 'ignore' or 'raise'"):
        ec.error_checking_behavior(nan="warn")
    with ec.error_checking_behavior(nan="raise"):  # integers and complex values are skipped
        ec.set_error_if_nan(jnp.array([1, 2]))
        ec.set_error_if_nan(jnp.array([complex(np.nan, 0)]))
    _no_error()


# --- meshes and export ---------------------------------------------------------------------
def test_error_checking_context_keeps_one_code_per_device():
    mesh = plax.make_mesh((2, 4), ("x", "y"))
    with plax.set_mesh(mesh), ec.error_checking_context():
        x = plax.device_put(jnp.arange(16.0).reshape(4, 4), NamedSharding(mesh, P("x", "y")))

        def f(x):
            ec.set_error_if(x == 5, "five")
            return x + 1
        plax.jit(f)(x + 100)
        _no_error()
        codes = ec._state.ref[...]
        assert codes.shape == (2, 4) and codes.sharding.spec == P("x", "y")
        plax.jit(f)(x)
        with pytest.raises(JaxValueError, match="five"):
            ec.raise_if_error()
        f(x)
        with pytest.raises(JaxValueError, match="five"):
            ec.raise_if_error()
    assert ec._state.ref is None or ec._state.ref.shape == ()  # the previous state is back


def test_exported_functions_carry_their_errors():
    from plax import export

    def g(x):
        ec.set_error_if(x < 0, "negative input")
        return jnp.sin(x)
    exp = export.export(plax.jit(ec.wrap_for_export(g)))(
        plax.ShapeDtypeStruct((3,), np.float32))
    call = ec.unwrap_from_import(export.deserialize(exp.serialize()).call)
    np.testing.assert_allclose(call(jnp.ones(3)), np.sin(np.ones(3)), rtol=1e-6)
    _no_error()
    ec.set_error_if(False, "a local error before")  # the imported codes are shifted past it
    plax.jit(call)(-jnp.ones(3))
    with pytest.raises(JaxValueError, match="negative input\nThe original traceback") as info:
        ec.raise_if_error()
    assert "ec.set_error_if(x < 0" in str(info.value)
