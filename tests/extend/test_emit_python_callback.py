"""mlir.emit_python_callback in rules written with jaxlib's MLIR bindings: the host function
gets NumPy arrays, its results are checked against the declared types, a token is threaded
through, and each use in a program calls its own function (values against NumPy)."""
import numpy as np
import pytest

import plax
from plax.extend import core as xcore
from plax.interpreters import mlir

F32, I32 = np.float32, np.int32
_count = iter(range(1 << 30))


def host_primitive(callback, out_avals, *, with_token=False, side_effect=False, seen=None):
    """A primitive whose lowering calls ``callback`` on the host (the results' avals made
    by ``out_avals(*in_avals)``)."""
    prim = xcore.Primitive(f"host_fn_{next(_count)}")
    prim.multiple_results = True
    prim.def_abstract_eval(lambda *avals: out_avals(*avals))

    def rule(ctx, *args):
        token = mlir.hlo.create_token() if with_token else None
        results, token_out, keep = mlir.emit_python_callback(
            ctx, callback, token, list(args), ctx.avals_in, ctx.avals_out,
            has_side_effect=side_effect)
        ctx.module_context.add_keepalive(keep)
        if seen is not None:
            seen.append(None if token_out is None else str(token_out.type))
        return results

    mlir.register_lowering(prim, rule)
    return prim


def _same(x):
    return [plax.core.ShapedArray(x.shape, x.dtype)]


CASES = [
    ("double", lambda x: (np.asarray(x) * 2,), _same, [np.arange(3, dtype=F32)],
     [np.arange(3, dtype=F32) * 2]),
    ("two results", lambda x, n: (x.sum().reshape(1), (n + 1).astype(I32)),
     lambda x, n: [plax.core.ShapedArray((1,), x.dtype), plax.core.ShapedArray((), n.dtype)],
     [np.ones((2, 3), F32), np.array(4, I32)], [np.array([6.0], F32), np.array(5, I32)]),
    ("python scalar result", lambda x: (F32(x.size),),
     lambda x: [plax.core.ShapedArray((), x.dtype)], [np.zeros((4, 5), F32)], [F32(20)]),
]


@pytest.mark.parametrize("with_token", [False, True])
@pytest.mark.parametrize("name, callback, out_avals, args, want", CASES,
                         ids=[c[0] for c in CASES])
def test_host_function_values(name, callback, out_avals, args, want, with_token):
    got_types, seen = [], []

    def host(*arrays):
        got_types.extend(type(a) for a in arrays)
        return callback(*arrays)

    prim = host_primitive(host, out_avals, with_token=with_token, seen=seen)
    outs = plax.jit(lambda *a: prim.bind(*a))(*args)
    for got, expected in zip(outs, want):
        np.testing.assert_array_equal(np.asarray(got), expected)
        assert np.asarray(got).dtype == expected.dtype
    assert got_types == [np.ndarray] * len(args)
    assert seen == ["!stablehlo.token" if with_token else None]


def test_each_use_calls_its_own_function():
    add_one = host_primitive(lambda x: (x + 1,), _same)
    times_ten = host_primitive(lambda x: (x * 10,), _same, side_effect=True)
    x = np.array([1.0, 2.0], F32)
    out = plax.jit(lambda v: times_ten.bind(add_one.bind(v)[0])[0] + add_one.bind(v)[0])(x)
    np.testing.assert_array_equal(out, (x + 1) * 10 + (x + 1))


@pytest.mark.parametrize("callback, match", [
    (lambda x: (np.zeros(5, F32),), "Incorrect output shape"),
    (lambda x: (np.zeros(3, np.int16),), "Incorrect output dtype"),
    (lambda x: (x, x), "Mismatched number of outputs"),
])
def test_wrong_results_raise(callback, match):
    prim = host_primitive(callback, _same)
    with pytest.raises(Exception, match=match):
        np.asarray(plax.jit(lambda v: prim.bind(v))(np.zeros(3, F32))[0])


def test_sharding_is_refused():
    prim = xcore.Primitive("host_fn_sharded")
    prim.multiple_results = True
    prim.def_abstract_eval(_same)
    mlir.register_lowering(prim, lambda ctx, x: mlir.emit_python_callback(
        ctx, lambda v: (v,), None, [x], ctx.avals_in, ctx.avals_out, has_side_effect=False,
        sharding=object())[0])
    with pytest.raises(NotImplementedError, match="sharding"):
        plax.jit(lambda v: prim.bind(v))(np.zeros(2, F32))
