"""plax.export's container format: round trips, VJPs of every order, and refusing bytes
that are not a whole, unchanged Exported."""
import collections
import re
import struct

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import export

X = np.linspace(-1, 2, 6, dtype=np.float32)


def _g(x):
    return jnp.sin(x) * 2.0


@pytest.fixture(scope="module")
def exp():
    return export.export(plax.jit(_g))(plax.ShapeDtypeStruct((6,), np.float32))


def test_round_trip_keeps_everything(exp):
    blob = exp.serialize()
    assert isinstance(blob, bytearray) and blob[:8] == b"PLAXEXP\x00"
    back = export.deserialize(blob)
    for name in ("fun_name", "in_tree", "out_tree", "in_avals", "out_avals", "platforms",
                 "nr_devices", "calling_convention_version", "module_kept_var_idx",
                 "in_shardings_hlo", "out_shardings_hlo"):
        assert getattr(back, name) == getattr(exp, name), name
    assert back.mlir_module_serialized == exp.mlir_module_serialized
    assert "stablehlo.sine" in back.mlir_module()
    assert not back.has_vjp()


@pytest.mark.parametrize("how", ["eager", "jit", "vmap"])
def test_deserialized_call(exp, how):
    back = export.deserialize(exp.serialize())
    if how == "vmap":
        xs = np.stack([X, X + 1])
        np.testing.assert_allclose(plax.vmap(back.call)(xs), np.sin(xs) * 2, rtol=1e-6)
        return
    call = back.call if how == "eager" else plax.jit(back.call)
    np.testing.assert_allclose(call(X), np.sin(X) * 2, rtol=1e-6)


def test_vjp_order_sets_how_often_it_differentiates(exp):
    x = X
    e0 = export.deserialize(exp.serialize())
    with pytest.raises(ValueError, match="No VJP is available"):
        plax.grad(lambda x: e0.call(x).sum())(x)
    e1 = export.deserialize(exp.serialize(vjp_order=1))
    np.testing.assert_allclose(plax.grad(lambda x: e1.call(x).sum())(x), 2 * np.cos(x),
                               rtol=1e-6)
    np.testing.assert_allclose(plax.jit(plax.grad(lambda x: e1.call(x).sum()))(x),
                               2 * np.cos(x), rtol=1e-6)
    with pytest.raises(ValueError, match="No VJP is available"):
        plax.grad(lambda x: plax.grad(lambda x: e1.call(x).sum())(x).sum())(x)
    e2 = export.deserialize(exp.serialize(vjp_order=2))
    second = plax.grad(lambda x: plax.grad(lambda x: e2.call(x).sum())(x).sum())(x)
    np.testing.assert_allclose(second, -2 * np.sin(x), rtol=1e-5, atol=1e-6)
    # under vmap too: per-example gradients
    xs = np.stack([x, x * 2])
    np.testing.assert_allclose(plax.vmap(plax.grad(lambda x: e1.call(x).sum()))(xs),
                               2 * np.cos(xs), rtol=1e-6)


def _corrupt(blob: bytearray, where: int) -> bytearray:
    out = bytearray(blob)
    out[where] ^= 0xFF
    return out


@pytest.mark.parametrize("mangle, match", [
    (lambda b: b"", "shorter than"),
    (lambda b: b[:30], "shorter than"),
    (lambda b: b[:-7], "truncated"),
    (lambda b: b + b"extra", "truncated or has trailing data"),
    (lambda b: _corrupt(b, len(b) - 3), "checksum does not match"),
    (lambda b: _corrupt(b, 60), "checksum does not match"),
    (lambda b: b"\x89PNG\r\n\x1a\n" + b[8:], "magic bytes"),
    (lambda b: b[:8] + struct.pack("<I", 99) + b[12:], "format version 99"),
])
def test_damaged_or_foreign_bytes_raise_value_error(exp, mangle, match):
    with pytest.raises(ValueError, match=match):
        export.deserialize(mangle(exp.serialize()))


def test_custom_pytree_nodes_need_registration():
    Pair = collections.namedtuple("Pair", "a b")
    e = export.export(plax.jit(lambda p: Pair(p.b, p.a)))(
        Pair(np.ones(2, np.float32), np.zeros(3, np.float32)))
    with pytest.raises(ValueError, match="unregistered type"):
        e.serialize()
    export.register_namedtuple_serialization(Pair, serialized_name="test_export.Pair")
    back = export.deserialize(e.serialize())
    out = back.call(Pair(np.ones(2, np.float32), np.zeros(3, np.float32)))
    assert isinstance(out, Pair) and out.a.shape == (3,) and out.b.shape == (2,)
    with pytest.raises(ValueError, match="Duplicate serialization registration"):
        export.register_namedtuple_serialization(Pair, serialized_name="other")


class _NotANode:
    pass


@pytest.mark.parametrize("register, error, match", [
    (lambda: export.register_pytree_node_serialization(
        _NotANode, serialized_name="test_export.NotANode", serialize_auxdata=lambda a: b"",
        deserialize_auxdata=lambda b: None), ValueError,
     "you must call first `jax.tree_util.register_pytree_node`"),
    (lambda: export.register_namedtuple_serialization(str, serialized_name="n/a"), ValueError,
     "Use `export.register_pytree_node_serialization` for types other than"),
    (lambda: export.export(plax.jit(lambda d: d[(0, 1)]))({(0, 1): np.float32(1)}).serialize(),
     TypeError, "Serialization is supported only for dictionaries with string keys"),
])
def test_what_cannot_be_registered_or_serialized_is_refused(register, error, match):
    with pytest.raises(error, match=match):
        register()


def test_integer_arguments_and_results_have_float0_cotangents():
    e = export.export(plax.jit(lambda x, n: (x * n, n + 1)))(np.ones(3, np.float32),
                                                              np.int32(2))
    from plax.core.dtypes import float0
    assert [a.dtype for a in e.vjp().in_avals][3] == float0
    assert [a.dtype for a in e.vjp().out_avals] == [np.float32, float0]
    back = export.deserialize(e.serialize(vjp_order=1))
    x = np.arange(3, dtype=np.float32)
    outs = back.call(x, np.int32(3))
    np.testing.assert_allclose(outs[0], 3 * x)
    assert int(outs[1]) == 4
    np.testing.assert_allclose(plax.grad(lambda x: back.call(x, np.int32(3))[0].sum())(x),
                               np.full(3, 3.0))


def test_the_module_read_back_shows_its_locations():
    exp = export.export(plax.jit(lambda x: jnp.sin(x.T)))(np.ones((2, 3), np.float32))
    text = export.deserialize(exp.serialize()).mlir_module()
    assert re.search(r"@main\(%arg0: tensor<2x3xf32> loc\(", text)
