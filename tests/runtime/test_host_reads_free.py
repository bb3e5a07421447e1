"""Reading an array's value on the host keeps nothing alive: once the user drops the array,
reference counting alone frees it and its device buffer (the cycle collector is off in
these tests, so a cycle would show as a leak)."""
import contextlib
import copy
import gc
import io
import pickle
import weakref

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.sharding import NamedSharding, PartitionSpec as P


@pytest.fixture(scope="module")
def collected_once():
    gc.collect()  # (a full collection per test costs seconds in a long-lived worker)


@pytest.fixture
def no_cycle_collector(collected_once):
    """Only reference counting frees anything during the test."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _sharded():
    mesh = plax.make_mesh((8,), ("x",))
    return plax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("x")))


def _replicated():
    mesh = plax.make_mesh((8,), ("x",))
    return plax.device_put(jnp.arange(8.0), NamedSharding(mesh, P()))


def _debug_print(x):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        plax.jit(lambda v: plax.debug.print("v={v}", v=v))(x)
        plax.effects_barrier()
    return out.getvalue()


# name -> (make the array, read it, what the read gives)
READS = {
    "float": (lambda: jnp.float32(2.5) * 2, float, 5.0),
    "int": (lambda: jnp.int32(3) + 1, int, 4),
    "bool": (lambda: jnp.int32(3) > 1, bool, True),
    "complex": (lambda: jnp.float32(2.5) * 2, complex, 5 + 0j),
    "index": (lambda: jnp.int32(1) + 1, lambda a: [10, 20, 30][a], 30),
    "item": (lambda: jnp.arange(3.0) + 1, lambda a: a.item(1), 2.0),
    "tolist": (lambda: jnp.arange(3.0) + 1, lambda a: a.tolist(), [1.0, 2.0, 3.0]),
    "tobytes": (lambda: jnp.arange(2, dtype=jnp.int32) + 1, lambda a: a.tobytes(),
                np.array([1, 2], np.int32).tobytes()),
    "repr": (lambda: jnp.arange(3.0) + 1, repr, "Array([1., 2., 3.], dtype=float32)"),
    "str": (lambda: jnp.arange(3.0) + 1, str, "[1. 2. 3.]"),
    "print": (lambda: jnp.arange(3.0) + 1,
              lambda a: print(a, file=io.StringIO()) or "printed", "printed"),
    "f-string": (lambda: jnp.float32(2.5) * 2, lambda a: f"{a:.2f}", "5.00"),
    "format": (lambda: jnp.arange(2.0), lambda a: format(a, ""), "[0. 1.]"),
    "__array__": (lambda: jnp.arange(3.0) + 1, lambda a: np.asarray(a).tolist(),
                  [1.0, 2.0, 3.0]),
    "np.array copy": (lambda: jnp.arange(3.0) + 1, lambda a: np.array(a).tolist(),
                      [1.0, 2.0, 3.0]),
    "iteration": (lambda: jnp.arange(3.0) + 1, lambda a: [float(v) for v in a],
                  [1.0, 2.0, 3.0]),
    "pickle": (lambda: jnp.arange(3.0) + 1,
               lambda a: pickle.loads(pickle.dumps(a)).tolist(), [1.0, 2.0, 3.0]),
    "deepcopy": (lambda: jnp.arange(3.0) + 1, lambda a: copy.deepcopy(a).tolist(),
                 [1.0, 2.0, 3.0]),
    "device_get": (lambda: jnp.arange(3.0) + 1, lambda a: plax.device_get(a).tolist(),
                   [1.0, 2.0, 3.0]),
    "debug.print": (lambda: jnp.arange(3.0) + 1, _debug_print, "v=[1. 2. 3.]\n"),
    "bfloat16": (lambda: jnp.arange(3.0, dtype=ml_dtypes.bfloat16) + 1,
                 lambda a: a.tolist(), [1.0, 2.0, 3.0]),
    "int4": (lambda: plax.device_put(np.array([1, -2], ml_dtypes.int4)),
             lambda a: a.tolist(), [1, -2]),
    "sharded over 8": (_sharded, lambda a: a.tolist(), [float(i) for i in range(8)]),
    "replicated over 8": (_replicated, lambda a: a.tolist(), [float(i) for i in range(8)]),
    "PRNG key repr": (lambda: plax.random.key(7),
                      lambda a: repr(a).startswith("Array((), dtype=key<fry>)"), True),
}


@pytest.mark.parametrize("name", list(READS))
def test_reading_a_value_keeps_no_reference_to_the_array(name, no_cycle_collector):
    make, read, want = READS[name]
    before = len(plax.live_arrays())
    x = make()
    assert read(x) == want
    assert read(x) == want  # (a second read: from the cached copy, where one is kept)
    gone = weakref.ref(x)
    del x
    assert gone() is None, f"{name}: the array outlived its last reference"
    assert len(plax.live_arrays()) == before


def test_a_loop_that_logs_its_loss_frees_every_loss(no_cycle_collector):
    f = plax.jit(lambda x: (x * 2.0).sum())
    ones = jnp.ones((1000,))
    start = len(plax.live_arrays())
    logged = []
    for i in range(200):
        loss = f(ones * i)
        logged.append(float(loss))
        print(loss, file=io.StringIO())
        f"{loss}"
    del loss
    assert len(plax.live_arrays()) == start
    assert logged[:3] == [0.0, 2000.0, 4000.0] and logged[-1] == 2000.0 * 199


def test_a_read_array_can_still_be_donated():
    f = plax.jit(lambda x: x * 2, donate_argnums=0)
    x = jnp.arange(4.0) + 1
    assert x.tolist() == [1.0, 2.0, 3.0, 4.0]  # a zero-copy read, not kept on the array
    y = f(x)
    assert x.is_deleted() and y.tolist() == [2.0, 4.0, 6.0, 8.0]


def test_a_jitted_closure_frees_its_constants_with_the_function(no_cycle_collector):
    big = jnp.ones((1000,)) + 1
    fun = lambda x: x + big  # noqa: E731
    jitted = plax.jit(fun)
    assert float(jitted(jnp.ones(1000))[0]) == 3.0
    gone = weakref.ref(big)
    del big, fun, jitted
    assert gone() is None


def test_internal_scalar_buffers_are_not_live_arrays():
    x = jnp.ones(3)
    before = len(plax.live_arrays())
    for i in range(20):
        y = x * i  # each Python scalar goes to the device once, and is cached there
    del y
    assert len(plax.live_arrays()) == before
