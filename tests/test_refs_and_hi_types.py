"""Mutable references (``plax.ref``) and library-defined hi types (``plax.experimental.hijax``):
eagerly, through jit (written back after the call), under grad and vmap where the lo
operations carry them, and the refusals that keep answers right. (The same programs as JAX
code: tests/jax_programs/refs_and_hijax.jaxpy.)"""
import dataclasses

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import hijax as hjx


def test_ref_reads_writes_and_jit_writes_back():
    r = plax.new_ref(jnp.arange(4.0))
    r[1:3] = jnp.array([10.0, 20.0])
    plax.ref.addupdate(r, 0, 1.0)
    np.testing.assert_array_equal(np.asarray(r[...]), [1.0, 10.0, 20.0, 3.0])

    calls = []

    @plax.jit
    def step(ref, lr):
        calls.append(1)
        ref[...] = ref[...] - lr * 2 * ref[...]
        return (ref[...] ** 2).sum()

    want = np.array([1.0, 10.0, 20.0, 3.0])
    for _ in range(3):
        want = want - 0.25 * 2 * want
        np.testing.assert_allclose(float(step(r, 0.25)), (want ** 2).sum(), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(r[...]), want, rtol=1e-6)
    assert len(calls) == 1  # traced once: later calls update the ref in the compiled program
    np.testing.assert_array_equal(np.asarray(plax.freeze(r)), np.asarray(r[...]))


def test_ref_inside_jit_under_vmap_reads_and_local_refs():
    @plax.jit
    def f(x):
        acc = plax.new_ref(jnp.zeros_like(x))
        for i in range(3):
            acc[...] += x * i
        return acc[...]

    np.testing.assert_allclose(np.asarray(f(jnp.ones(2))), [3.0, 3.0])
    r = plax.new_ref(jnp.array([1.0, 2.0]))
    out = plax.vmap(lambda x: r[...] * x)(jnp.arange(3.0))
    np.testing.assert_allclose(np.asarray(out), np.outer(np.arange(3.0), [1.0, 2.0]))
    # grad of a function that updates a ref it creates itself
    g = plax.grad(lambda x: (lambda q: (q.__setitem__(..., q[...] * x), q[...].sum())[1])(
        plax.new_ref(jnp.arange(3.0))))(2.0)
    assert float(g) == 3.0


@pytest.mark.parametrize("program,match", [
    (lambda r: plax.vmap(lambda x: r.__setitem__(0, x))(jnp.arange(2.0)),
     "set/swap operation with vmapped value on an unbatched array reference"),
    (lambda r: plax.jit(lambda a, b: a[...] + b[...])(r, r),
     "only one reference to a mutable array may be passed as an argument"),
    (lambda r: plax.grad(lambda x: (r.__setitem__(..., x * r[...]), x)[1])(1.0),
     "Move the array reference to be an argument of the differentiated function"),
    (lambda r: plax.jit(lambda: plax.new_ref(1.0))(),
     "mutable array references cannot be returned"),
    (lambda r: r.__setitem__(..., jnp.ones(2, jnp.int32)), "Invalid dtype for `swap`"),
    (lambda r: r.__setitem__(..., jnp.ones(3)), "Invalid shape for `swap`"),
])
def test_ref_refusals(program, match):
    r = plax.new_ref(jnp.ones(2))
    with pytest.raises(ValueError, match=match):
        program(r)
    np.testing.assert_array_equal(np.asarray(r[...]), [1.0, 1.0])  # left as it was


class Box:
    """A mutable hi value: holds one array whose shape may change."""

    def __init__(self, value):
        self.value = value

    def cur_qdd(self):
        return BoxState(plax.typeof(self.value))


@dataclasses.dataclass(frozen=True)
class BoxState:
    aval: object


@dataclasses.dataclass(frozen=True)
class BoxTy(hjx.MutableHiType):
    def lo_ty_qdd(self, state):
        return [state.aval]

    def new_from_loval(self, state, value):
        return Box(value)

    def read_loval(self, state, box):
        return [box.value]

    def update_from_loval(self, state, box, value):
        box.value = value

    def to_tangent_aval(self):
        return BoxTy()


hjx.register_hitype(Box, lambda box: BoxTy())


class BoxSet(hjx.HiPrimitive):
    multiple_results = True

    def abstract_eval(self, box_ty, value):
        return [], set()

    def to_lojax(self, box, value):
        box.value = value
        return []


class Scaled:
    """An immutable hi value: an array and a scale."""

    def __init__(self, data, scale):
        self.data, self.scale = data, scale


@dataclasses.dataclass(frozen=True)
class ScaledTy(hjx.HiType):
    data: object
    scale: object

    def lo_ty(self):
        return [self.data, self.scale]

    def lower_val(self, s):
        return [s.data, s.scale]

    def raise_val(self, data, scale):
        return Scaled(data, scale)


hjx.register_hitype(Scaled, lambda s: ScaledTy(plax.typeof(s.data), plax.typeof(s.scale)))


class Dequantize(hjx.HiPrimitive):
    def abstract_eval(self, ty):
        return ty.data, set()

    def to_lojax(self, s):
        return s.data * s.scale


box_set, dequantize = BoxSet("box_set"), Dequantize("dequantize")


def test_mutable_hi_value_through_jit_is_updated_and_may_change_type():
    box = Box(jnp.zeros(2))

    @plax.jit
    def grow(box, x):
        box_set.bind(box, jnp.concatenate([box.value, x[None]]))
        return box.value.sum()

    assert float(grow(box, 1.0)) == 1.0 and box.value.shape == (3,)
    assert float(grow(box, 2.0)) == 3.0 and box.value.shape == (4,)  # a new type: retraced
    np.testing.assert_array_equal(np.asarray(box.value), [0.0, 0.0, 1.0, 2.0])
    assert plax.typeof(box) == BoxTy()


def test_hi_primitive_expands_under_jit_grad_and_vmap():
    s = Scaled(jnp.arange(3.0), jnp.float32(2.0))
    assert plax.typeof(s) == ScaledTy(plax.typeof(s.data), plax.typeof(s.scale))
    np.testing.assert_allclose(np.asarray(dequantize.bind(s)), [0.0, 2.0, 4.0])
    out = plax.jit(lambda s, x: dequantize.bind(s) * x)(s, 3.0)
    np.testing.assert_allclose(np.asarray(out), [0.0, 6.0, 12.0])
    g = plax.grad(lambda c: dequantize.bind(Scaled(jnp.arange(3.0), c)).sum())(2.0)
    assert float(g) == 3.0  # d/dc sum(data * c)
    v = plax.vmap(lambda x: dequantize.bind(Scaled(x, jnp.sin(x))))(jnp.arange(3.0))
    np.testing.assert_allclose(np.asarray(v), np.arange(3.0) * np.sin(np.arange(3.0)),
                               rtol=1e-6)
    # A jitted function may return an immutable hi value: it is raised again outside.
    back = plax.jit(lambda s: Scaled(s.data + 1, s.scale))(s)
    assert type(back) is Scaled
    np.testing.assert_allclose(np.asarray(back.data), [1.0, 2.0, 3.0])


def test_an_array_type_is_its_own_lo_type():
    from plax.core.avals import ShapedArray
    x = jnp.arange(3.0)
    aval = plax.typeof(x)
    assert aval.lo_ty() == [aval] and not aval.is_high and not aval.has_qdd
    assert aval.lower_val(x) == [x] and aval.raise_val(x) is x
    weak = ShapedArray((), np.dtype(np.float32), True)
    assert weak.normalize() == ShapedArray((), np.dtype(np.float32), False)


def test_refs_passed_by_keyword_are_written_back_to_the_right_objects():
    @plax.jit
    def f(x, *, zeta, alpha):
        zeta[...] = zeta[...] + x
        alpha[...] = alpha[...] * x
        return x

    zeta, alpha = plax.new_ref(jnp.ones(2)), plax.new_ref(jnp.full(3, 2.0))
    f(3.0, zeta=zeta, alpha=alpha)
    np.testing.assert_array_equal(np.asarray(zeta[...]), [4.0, 4.0])
    np.testing.assert_array_equal(np.asarray(alpha[...]), [6.0, 6.0, 6.0])


class ForwardingBox(Box):
    """A Box that forwards the attributes it lacks to its array (``shape``, ``dtype``,
    ``aval``), as flax.nnx's hijax Variables do: its type is still the registered one."""

    def __getattr__(self, name):
        return getattr(self.__dict__["value"], name)


class ForwardingBoxTy(BoxTy):
    def new_from_loval(self, state, value):
        return ForwardingBox(value)


hjx.register_hitype(ForwardingBox, lambda box: ForwardingBoxTy())


def test_a_hi_value_forwarding_array_attributes_is_typed_and_jitted_as_hi():
    box = ForwardingBox(jnp.zeros(2))
    assert box.shape == (2,) and plax.typeof(box) == ForwardingBoxTy()
    seen = []

    @plax.jit
    def bump(box, x):
        seen.append(type(box))
        box_set.bind(box, box.value + x)
        return box.value.sum()

    assert float(bump(box, 1.0)) == 2.0 and float(bump(box, 2.0)) == 6.0
    assert seen == [ForwardingBox]  # the function saw the box, not a tracer; traced once
    np.testing.assert_array_equal(np.asarray(box.value), [3.0, 3.0])


def test_loops_trace_their_bodies_once_while_hi_types_are_registered():
    traced = []

    def body(c, x):
        traced.append("scan")
        return c + x, x * 2

    def step(s):
        traced.append("while")
        return Scaled(s.data + 1, s.scale)

    for _ in range(2):
        c, ys = plax.lax.scan(body, 0.0, jnp.arange(4.0))
        assert float(c) == 6.0
        np.testing.assert_array_equal(np.asarray(ys), [0.0, 2.0, 4.0, 6.0])
        out = plax.lax.while_loop(lambda s: s.data < 3, step,
                                  Scaled(jnp.float32(0.0), jnp.float32(2.0)))
        assert type(out) is Scaled and float(out.data) == 3.0
    assert traced == ["scan", "while"]


def test_a_value_stored_inside_grad_under_jit_is_kept():
    # grad under jit prunes the primal computation it does not return; a value the
    # function stored away (a hi value's contents, a Python attribute) is not pruned.
    box, store = Box(jnp.zeros(())), {}

    @plax.jit
    def f(box, x):
        def loss(x):
            box_set.bind(box, box.value + 1.0)  # (not depending on x: no tracer of grad's)
            store["sin"] = jnp.sin(box.value)
            return x * 3.0
        return plax.grad(loss)(x), store["sin"]

    g, s = f(box, 0.5)
    assert float(g) == 3.0 and float(box.value) == 1.0
    np.testing.assert_allclose(float(s), np.sin(1.0), rtol=1e-6)
    jaxpr = plax.make_jaxpr(plax.grad(lambda x: jnp.sin(x) * jnp.cos(x)))(1.0)
    assert [e.primitive.name for e in jaxpr.eqns].count("mul") == 4  # the primal's is pruned


def test_eval_shape_takes_hi_values_and_leaves_them_unchanged():
    box = Box(jnp.zeros(2))

    def grow(box, x):
        box_set.bind(box, jnp.concatenate([box.value, x[None]]))
        return box.value * 2, dequantize.bind(Scaled(box.value, x))

    out = plax.eval_shape(grow, box, jnp.float32(1.0))
    assert [(o.shape, o.dtype) for o in out] == [((3,), np.float32)] * 2
    assert box.value.shape == (2,)  # traced, not run: the box keeps its contents
    assert plax.typeof(plax.ShapeDtypeStruct((2, 3), np.int32)) == plax.typeof(
        jnp.zeros((2, 3), np.int32))  # (the type a ShapeDtypeStruct describes, as in JAX)


class BoxGet(hjx.HiPrimitive):
    def to_lojax(self, box):
        return box.value


box_get = BoxGet("box_get")


def test_a_mutable_hi_value_closed_over_by_a_body_is_carried_not_baked_in():
    box = Box(jnp.float32(1.0))

    def add(c, _):
        return c + box_get.bind(box), None

    assert float(plax.lax.scan(add, 0.0, None, length=3)[0]) == 3.0
    box_set.bind(box, jnp.float32(5.0))
    assert float(plax.lax.scan(add, 0.0, None, length=3)[0]) == 15.0  # (not the first trace's)

    def count(c, _):
        box_set.bind(box, box_get.bind(box) + 1.0)
        return c + box_get.bind(box), None

    c, _ = plax.lax.scan(count, 0.0, None, length=3)
    assert float(c) == 6.0 + 7.0 + 8.0 and float(box.value) == 8.0  # (written back)

    @plax.jit
    def scale(x):
        box_set.bind(box, box_get.bind(box) * x)
        return box_get.bind(box)

    assert float(scale(2.0)) == 16.0 and float(box.value) == 16.0
    assert float(scale(0.5)) == 8.0 and float(box.value) == 8.0

    def step(i):
        box_set.bind(box, box_get.bind(box) + 1.0)
        return i + 1

    assert int(plax.lax.while_loop(lambda i: i < 3, step, 0)) == 3
    assert float(box.value) == 11.0 and not isinstance(box.value, plax.core.Tracer)

    @plax.jit
    def made_inside(x):  # (a hi value made in the body, holding no array yet, lives there)
        local = Box(0.0)
        box_set.bind(local, x * 2)
        return box_get.bind(local)

    assert float(made_inside(3.0)) == 6.0
