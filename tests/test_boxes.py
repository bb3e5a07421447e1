"""Boxes and logs (``plax.higher_order.boxes``, JAX's ``jax._src.hijax.Box``/``Log``): eagerly,
as jit arguments and closed over by jit, loops and cond, with type changes."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.hi_types import MappingSpec
from plax.extend import core as ecore
from plax.higher_order.boxes import Box, BoxTy, Log, box_get, box_set, new_box


def test_box_eager_and_type_state():
    box = Box(1.0)
    assert box.get() == 1.0 and plax.typeof(box) == BoxTy()
    box.set([jnp.arange(3), 2.0])
    state = box.cur_qdd()
    assert state.leaf_avals == (plax.typeof(jnp.arange(3)), plax.typeof(2.0))
    assert new_box().get() is None
    with pytest.raises(TypeError, match="box_set expects a Box"):
        box_set(1.0, 2.0)


@pytest.mark.parametrize("start,step,want", [
    (1.0, 2.0, [3.0, 5.0]),              # same type each call: traced once
    (None, 4.0, [4.0, [4.0, 4.0]]),      # None -> scalar -> list: the type changes
])
def test_box_as_jit_argument(start, step, want):
    @plax.jit
    def f(box, x):
        val = box_get(box)
        if val is None:
            box_set(box, x)
        elif isinstance(val, list):
            box_set(box, [x, x])
        elif box.cur_qdd().treedef == plax.tree_util.tree_structure(0.0) and start is None:
            box_set(box, [x, x])
        else:
            box_set(box, val + x)

    box = Box(start)
    for w in want:
        f(box, step)
        np.testing.assert_allclose(np.asarray(box.get()), np.asarray(w))


def test_box_closed_over_by_jit_scan_while_cond():
    box = Box(1.0)

    @plax.jit
    def g(x):
        box.set(box.get() + x)

    g(2.0)
    g(5.0)
    assert float(box.get()) == 8.0

    def body(_, __):
        box.set(box.get() * 2)
        return None, None
    plax.jit(lambda: plax.lax.scan(body, None, None, length=3))()
    assert float(box.get()) == 64.0

    plax.lax.while_loop(lambda i: i < 2, lambda i: (box.set(box.get() + 1.0), i + 1)[1], 0)
    assert float(box.get()) == 66.0

    plax.lax.cond(True, lambda: box.set(box.get() - 6.0), lambda: None)
    assert float(box.get()) == 60.0


def test_log_append_in_jit_and_scan_stacks():
    log = Log()

    @plax.jit
    def f(log, x):
        log.append("x", x + 1)
        plax.jit(lambda: log.append("x", x + 2))()

    f(log, 0)
    f(log, 10)
    np.testing.assert_array_equal([int(v) for v in log._dct["x"]], [1, 2, 11, 12])

    log2 = Log()

    def body(_, x):
        log2.append("y", 2 * x)
        return (), ()
    plax.lax.scan(body, (), jnp.arange(4))
    (stacked,) = log2.read()["y"]
    np.testing.assert_array_equal(stacked, 2 * np.arange(4))


def test_aval_mapping_handlers_and_mapping_specs():
    class Ty:
        def __init__(self, n):
            self.n = n

    ecore.aval_mapping_handlers[Ty] = (lambda size, axis, a: Ty(a.n - 1),
                                       lambda size, axis, mesh, a: Ty(a.n + 1))
    try:
        assert ecore.mapped_aval(3, 0, Ty(2)).n == 1
        assert ecore.unmapped_aval(3, 0, Ty(2)).n == 3
    finally:
        del ecore.aval_mapping_handlers[Ty]

    class Spec(MappingSpec):
        pass

    with pytest.raises(NotImplementedError, match="MappingSpec"):
        plax.vmap(lambda x: x, in_axes=Spec())(jnp.ones(3))


def test_closed_box_type_change_in_loop_refused():
    box = Box([1.0])

    def body(i):
        box.set(box.get() * 2)  # a list twice as long
        return i + 1
    with pytest.raises(TypeError, match="type-changing mutations not allowed"):
        plax.lax.while_loop(lambda i: i < 3, body, 0)


def test_immutable_hi_values_as_loop_carries_and_ys():
    import dataclasses
    from plax.experimental import hijax as hjx

    @dataclasses.dataclass(frozen=True)
    class Pair:
        a: object
        b: object

    @dataclasses.dataclass(frozen=True)
    class PairTy(hjx.HiType):
        ta: object
        tb: object

        def lo_ty(self):
            return [self.ta, self.tb]

        def lower_val(self, p):
            return [p.a, p.b]

        def raise_val(self, a, b):
            return Pair(a, b)

    hjx.register_hitype(Pair, lambda p: PairTy(plax.typeof(p.a), plax.typeof(p.b)))
    out = plax.lax.while_loop(lambda p: p.a < 3, lambda p: Pair(p.a + 1, p.b * 2),
                              Pair(jnp.int32(0), jnp.float32(1)))
    assert isinstance(out, Pair) and int(out.a) == 3 and float(out.b) == 8.0

    def body(c, x):
        return Pair(c.a + x, c.b), Pair(x, 2 * x)
    c, ys = plax.jit(lambda: plax.lax.scan(body, Pair(jnp.float32(0), jnp.float32(1)),
                                           jnp.arange(3.0)))()
    assert float(c.a) == 3.0 and isinstance(ys, Pair)
    np.testing.assert_array_equal(ys.b, [0.0, 2.0, 4.0])
