"""plax.numpy products (matmul, dot, tensordot, einsum, kron, trace, diagonal ...) against NumPy."""
import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.runtime.array import Array

BF16 = np.dtype(ml_dtypes.bfloat16)


def make(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -3, 4, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def f32(x):
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype == BF16 else x


def check(got, want, dtype=None, tol=1e-5):
    assert isinstance(got, Array), type(got)
    got_np, want = np.asarray(got), np.asarray(want)
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    assert got_np.shape == want.shape, (got_np.shape, want.shape)
    if got_np.dtype == BF16:
        np.testing.assert_allclose(f32(got_np), want, rtol=5e-2, atol=5e-2)
    elif got_np.dtype.kind in "fc":
        np.testing.assert_allclose(got_np, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got_np, want)


MATMUL_SHAPES = [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
    ((3,), (5, 3, 4)), ((1, 2, 3), (4, 3, 5)), ((7, 1, 2, 3), (4, 3, 5)), ((2, 3), (6, 3, 4)),
    ((2, 1, 2, 3), (1, 5, 3, 4)), ((0, 3), (3, 2)), ((2, 0), (0, 3)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=str)
def test_matmul_shapes(sa, sb):
    a, b = make(sa, seed=1), make(sb, seed=2)
    check(jnp.matmul(a, b), np.matmul(a, b), dtype=np.float32)


@pytest.mark.parametrize("da,db,out", [
    (np.int32, np.int32, np.int32), (np.bool_, np.bool_, np.bool_), (BF16, BF16, BF16),
    (np.int8, np.float32, np.float32), (np.int8, np.int8, np.int8), (np.uint8, np.int8, np.int16),
], ids=str)
def test_matmul_dtypes(da, db, out):
    a, b = make((2, 3), da, seed=3), make((3, 4), db, seed=4)
    want = np.matmul(f32(a).astype(np.float32), f32(b).astype(np.float32))
    if np.dtype(out) == np.bool_:
        want = want > 0
    check(jnp.matmul(a, b), want, dtype=out)


def test_matmul_operator_and_preferred_element_type():
    a, b = jnp.asarray(make((4, 2, 3), seed=5)), jnp.asarray(make((3, 2), seed=6))
    check(a @ b, np.asarray(a) @ np.asarray(b))
    check(np.asarray(a) @ b, np.asarray(a) @ np.asarray(b))  # NumPy defers to plax
    i8 = make((2, 3), np.int8, seed=7)
    check(jnp.matmul(i8, i8.T, preferred_element_type=np.int32),
          i8.astype(np.int32) @ i8.T.astype(np.int32), dtype=np.int32)
    bf = make((2, 3), BF16, seed=8)
    check(jnp.matmul(bf, bf.T, preferred_element_type=np.float32),
          f32(bf) @ f32(bf).T, dtype=np.float32, tol=1e-2)
    check(jnp.matmul(make((2, 3)), make((3,)), precision="highest"), make((2, 3)) @ make((3,)))


@pytest.mark.parametrize("sa,sb", [((), (3,)), ((3,), ()), ((3,), (3,)), ((2, 3), (3,)),
                                   ((2, 3), (3, 4)), ((2, 3, 4), (5, 4, 6)), ((4,), (2, 4, 3))],
                         ids=str)
def test_dot(sa, sb):
    a, b = make(sa, seed=9), make(sb, seed=10)
    check(jnp.dot(a, b), np.dot(a, b))


def test_dot_scalars_keep_weak_type():
    r = jnp.dot(2.0, 3.0)
    assert plax.typeof(r).weak_type and float(r) == 6.0
    r = jnp.dot(2.0, np.ones(3, np.int32))
    assert r.dtype == np.float32 and plax.typeof(r).weak_type
    ones = np.ones(3, np.float32)
    assert not plax.typeof(jnp.einsum("i,i", ones, ones)).weak_type


def test_vdot_inner_outer_vecdot():
    c1, c2 = make((2, 3), np.complex64, seed=11), make((3, 2), np.complex64, seed=12)
    check(jnp.vdot(c1, c2), np.vdot(c1, c2), dtype=np.complex64)
    a, b = make((2, 3, 4), seed=13), make((5, 4), seed=14)
    check(jnp.inner(a, b), np.inner(a, b))
    check(jnp.inner(2.0, b), np.inner(2.0, b))
    check(jnp.outer(make((2, 2), np.int8), make((3,), np.float32)),
          np.outer(make((2, 2), np.int8), make((3,))), dtype=np.float32)
    x1, x2 = make((2, 3), np.complex64, seed=15), make((4, 1, 3), np.complex64, seed=16)
    check(jnp.vecdot(x1, x2), np.vecdot(x1, x2))
    y1, y2 = make((3, 2)), make((3, 1))
    check(jnp.vecdot(y1, y2, axis=0), np.vecdot(y1, y2, axis=0))
    m, v = make((2, 3, 4), seed=17), make((4,), seed=18)
    check(jnp.matvec(m, v), np.matvec(m, v))
    check(jnp.vecmat(make((3,), seed=19), m), np.vecmat(make((3,), seed=19), m))


@pytest.mark.parametrize("sa,sb,axes", [
    ((3, 4), (2, 5), 0), ((3, 4, 5), (5, 2), 1), ((3, 4, 5), (4, 5, 2), 2),
    ((3, 4, 5), (2, 5, 3), ([2], [1])), ((3, 4, 5), (2, 5, 3), ((0, 2), (2, 1))),
    ((3, 4, 5), (2, 5, 3), (-1, 1)), ((3, 4), (2,), ([], [])),
], ids=str)
def test_tensordot(sa, sb, axes):
    a, b = make(sa, seed=20), make(sb, seed=21)
    check(jnp.tensordot(a, b, axes), np.tensordot(a, b, axes))


def test_kron():
    for sa, sb in [((2, 2), (2, 3)), ((3,), (2, 2)), ((), (3,)), ((2, 1, 2), (3, 2))]:
        a, b = make(sa, seed=22), make(sb, seed=23)
        check(jnp.kron(a, b), np.kron(a, b))
    check(jnp.kron(make((2,), np.int8), make((2,), np.int32)),
          np.kron(make((2,), np.int8), make((2,), np.int32)), dtype=np.int32)


def test_trace_diagonal_diag():
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    for offset, a1, a2 in [(0, 0, 1), (1, 0, 1), (-2, 0, 1), (2, 1, 2), (-1, 2, 0), (7, 0, 2),
                           (0, -1, -2)]:
        check(jnp.diagonal(x, offset, a1, a2), np.diagonal(x, offset, a1, a2))
        check(jnp.trace(x, offset, a1, a2), np.trace(x, offset, a1, a2))
    i8 = make((3, 3), np.int8, seed=24)
    check(jnp.trace(i8), np.trace(i8), dtype=np.int32)
    check(jnp.trace(np.eye(3, dtype=bool)), 3, dtype=np.int32)
    check(jnp.trace(i8, dtype=np.float32), np.trace(i8), dtype=np.float32)
    check(jnp.diagonal(np.zeros((0, 3), np.float32)), np.zeros((0,)))
    v = make((3,), seed=25)
    for k in (0, 1, -2):
        check(jnp.diag(v, k), np.diag(v, k))
    check(jnp.diag(x[0], 1), np.diag(x[0], 1))
    m = jnp.asarray(x)
    check(m.trace(), np.trace(x))
    check(m.diagonal(1, 1, 2), x.diagonal(1, 1, 2))
    check(m.dot(make((5,), seed=26)), x.dot(make((5,), seed=26)))


EINSUM_SPECS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iji->j", [(3, 4, 3)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->ji", [(2, 3)]),
    ("ijk->", [(2, 3, 4)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("bij,bjk->bki", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(5, 2, 3), (1, 3, 4)]),
    ("ij...,j...->i...", [(2, 3, 4), (3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]),
    ("iij,jk", [(3, 3, 4), (4, 5)]),
    ("ij,->ij", [(2, 3), ()]),
    ("i,i,i->i", [(3,), (3,), (3,)]),
    ("bqd,bkd->bqk", [(2, 3, 4), (2, 5, 4)]),
    ("bqhd,bkhd->bhqk", [(2, 4, 3, 5), (2, 6, 3, 5)]),
    ("ij,jk,kl->li", [(2, 3), (3, 4), (4, 5)]),
]

# Pairs whose product dot_general can lay out in the requested order with one of the two
# operand orders: einsum picks that order, and no transpose follows the dot.
NO_TRANSPOSE_SPECS = [
    ("bqd,bkd->bqk", [(2, 3, 4), (2, 5, 4)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("bqhd,bkhd->bhqk", [(2, 4, 3, 5), (2, 6, 3, 5)]),
    ("ba,bc,cd->ad", [(3, 4), (3, 5), (5, 6)]),
]


@pytest.mark.parametrize("spec,shapes", EINSUM_SPECS, ids=[s for s, _ in EINSUM_SPECS])
def test_einsum(spec, shapes):
    ops = [make(s, seed=30 + i) for i, s in enumerate(shapes)]
    want = np.einsum(spec, *ops)
    check(jnp.einsum(spec, *ops), want)
    if len(ops) > 2:
        for optimize in ("greedy", True, False, "optimal"):
            check(jnp.einsum(spec, *ops, optimize=optimize), want)


@pytest.mark.parametrize("spec,shapes", NO_TRANSPOSE_SPECS, ids=[s for s, _ in NO_TRANSPOSE_SPECS])
def test_einsum_operand_order_avoids_transpose(spec, shapes):
    ops = [make(s, seed=50 + i) for i, s in enumerate(shapes)]
    text = str(plax.make_jaxpr(lambda *a: jnp.einsum(spec, *a))(*ops))
    assert "dot_general" in text and "transpose" not in text
    check(jnp.einsum(spec, *ops), np.einsum(spec, *ops))


def test_einsum_dtypes_and_forms():
    i8 = make((2, 3), np.int8, seed=40)
    check(jnp.einsum("ij,jk", i8, i8.T), i8.astype(int) @ i8.T.astype(int), dtype=np.int8)
    check(jnp.einsum("ij,jk", i8, i8.T, preferred_element_type=np.int32),
          i8.astype(int) @ i8.T.astype(int), dtype=np.int32)
    check(jnp.einsum("ij->", i8, preferred_element_type=np.int32), i8.astype(int).sum(),
          dtype=np.int32)
    b = make((2, 3), np.bool_, seed=41)
    check(jnp.einsum("ij->i", b), b.any(axis=1), dtype=np.bool_)
    check(jnp.einsum("ij,j", i8, make((3,))), np.einsum("ij,j", i8, make((3,))),
          dtype=np.float32)
    a, c = make((2, 3), seed=42), make((3, 4), seed=43)
    check(jnp.einsum(a, [0, 1], c, [1, 2], [2, 0]), np.einsum("ij,jk->ki", a, c))
    check(jnp.einsum(a, [Ellipsis, 1], c, [1, 2]), np.einsum("...j,jk", a, c))
    path, info = jnp.einsum_path("ij,jk,kl->il", make((2, 3)), make((3, 4)), make((4, 5)),
                                 optimize="greedy")
    assert len(path) == 2 and "ij,jk,kl->il" in str(info)


def test_einsum_dot_general_override():
    calls = []

    def doubled_dot(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
        calls.append((np.shape(lhs), np.shape(rhs), preferred_element_type))
        return 2 * plax.lax.dot_general(lhs, rhs, dimension_numbers, precision,
                                        preferred_element_type=preferred_element_type)

    a, b, c = make((2, 3), seed=60), make((3, 4), seed=61), make((4, 5), seed=62)
    got = jnp.einsum("ij,jk,kl->il", a, b, c, _dot_general=doubled_dot, optimize="greedy")
    check(got, 4 * np.einsum("ij,jk,kl->il", a, b, c))
    assert len(calls) == 2 and all(p == np.float32 for _, _, p in calls)
    jitted = plax.jit(lambda x, y: jnp.einsum("ij,jk", x, y, _dot_general=doubled_dot,
                                              preferred_element_type=np.float32))
    check(jitted(a, b), 2 * (a @ b))
    # a single-operand einsum makes no contraction, so the override is not called
    calls.clear()
    check(jnp.einsum("ij->j", a, _dot_general=doubled_dot), a.sum(0))
    assert calls == []


def test_einsum_out_sharding():
    mesh = plax.make_mesh((2,), ("x",), axis_types=(plax.sharding.AxisType.Explicit,),
                          devices=plax.devices()[:2])
    a, b = make((4, 3), seed=63), make((3, 2), seed=64)
    with plax.set_mesh(mesh):
        out = jnp.einsum("ij,jk->ik", a, b, out_sharding=plax.P("x"))
    check(out, a @ b)
    assert out.sharding.spec == plax.P("x", None) and len(out.sharding.device_set) == 2


def test_jaxprs():
    text = str(plax.make_jaxpr(jnp.matmul)(np.ones((5, 2, 3), np.float32),
                                           np.ones((3, 4), np.float32)))
    assert "dot_general" in text and "f32[5,2,4]" in text
    assert "preferred_element_type=float32" in text
    text = str(plax.make_jaxpr(jnp.matmul)(np.ones((7, 1, 2, 3), np.float32),
                                           np.ones((4, 3, 5), np.float32)))
    assert "squeeze" in text and "transpose" in text and "f32[7,4,2,5]" in text
    text = str(plax.make_jaxpr(lambda a, b: jnp.einsum("bij,bjk->bki", a, b))(
        np.ones((2, 3, 4), np.float32), np.ones((2, 4, 6), np.float32)))
    assert "dot_general" in text and "f32[2,6,3]" in text
    text = str(plax.make_jaxpr(lambda a: jnp.einsum("ii->i", a))(np.ones((3, 3), np.float32)))
    assert "iota" in text and "select_n" in text and "reduce_sum" in text
    text = str(plax.make_jaxpr(lambda a: jnp.trace(a))(np.ones((3, 3), np.float32)))
    assert "reduce_sum" in text
    text = str(plax.make_jaxpr(lambda a, b: a @ b)(np.ones((3,), np.float32),
                                                  np.ones((3, 2), np.float32)))
    assert "dot_general" in text and "f32[2]" in text


def test_errors():
    a, b = np.ones((2, 3), np.float32), np.ones((4, 5), np.float32)
    with pytest.raises(TypeError, match=r"matmul: contracting dimensions.*\(2, 3\).*\(4, 5\)"):
        jnp.matmul(a, b)
    with pytest.raises(TypeError, match=r"\(2, 3\).*\(4, 5\)"):
        _ = jnp.asarray(a) @ jnp.asarray(b)
    with pytest.raises(ValueError, match="Incompatible batch shapes for matmul.*\\(2, 2, 3\\).*"
                                         "\\(4, 3, 5\\)"):
        jnp.matmul(np.ones((2, 2, 3)), np.ones((4, 3, 5)))
    with pytest.raises(ValueError, match="matmul input operand 0 must have ndim at least 1"):
        jnp.matmul(np.float32(1), b)
    with pytest.raises(TypeError, match="dot: contracting dimensions"):
        jnp.dot(a, b)
    with pytest.raises(TypeError, match="vdot: contracting dimensions"):
        jnp.vdot(a, b)
    with pytest.raises(TypeError, match="Number of tensordot axes \\(axes 3\\) exceeds"):
        jnp.tensordot(a, np.ones((3, 5)), 3)
    with pytest.raises(TypeError, match="tensordot requires axes lists to have equal length"):
        jnp.tensordot(a, np.ones((3, 5)), ([1, 0], [0]))
    with pytest.raises(TypeError, match="tensordot axes argument must be"):
        jnp.tensordot(a, np.ones((3, 5)), "a")
    with pytest.raises(ValueError, match="diagonal requires an array of at least two"):
        jnp.diagonal(np.ones(3))
    with pytest.raises(ValueError, match="axis1 and axis2 cannot be the same"):
        jnp.diagonal(a, 0, 1, -1)
    with pytest.raises(ValueError, match="diag input must be 1d or 2d"):
        jnp.diag(np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="Size of label 'j'"):
        jnp.einsum("ij,jk", a, b)
    with pytest.raises(ValueError, match="subscripts"):
        jnp.einsum("ij,jk", a)
    with pytest.raises(ValueError, match="'out' argument must be None"):
        jnp.einsum("ij", a, out=a)
    with pytest.raises(ValueError, match="vecdot: the axes along which"):
        jnp.vecdot(a, np.ones((2, 4)))
