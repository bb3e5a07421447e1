"""lax.psend and lax.precv: one-sided sends between devices inside shard_map. As in JAX they
run on GPUs only; here (no GPU needed) their jaxprs, their CUDA lowering (XLA Send and Recv
on one channel, with every group's source-target pairs), their refusal on the CPU and
their argument checks. test_on_gpu.py runs them."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import export, lax
from plax.experimental.shard_map import shard_map
from plax.runtime import xla
from plax.sharding import Mesh, PartitionSpec as P

RING = [(0, 1), (1, 2), (2, 3), (3, 0)]


def _exchange(perm, axis="x"):
    def body(x):
        token = lax.psend(x, axis, perm)
        return lax.precv(token, plax.ShapeDtypeStruct(x.shape, x.dtype), axis, perm)
    return body


def _one_axis():
    return Mesh(np.array(plax.devices()[:4]), ("x",))


def test_the_jaxpr_has_a_token_from_psend_into_precv():
    f = shard_map(_exchange(RING), mesh=_one_axis(), in_specs=P("x"), out_specs=P("x"))
    text = str(plax.make_jaxpr(f)(jnp.arange(8.0)))
    assert "b:Token = psend[" in text and "precv[" in text and "] b\n" in text
    assert "out_shape=float32[2]" in text


def test_an_unused_send_is_kept():
    def body(x):
        lax.psend(x, "x", RING)
        return x * 2
    f = plax.jit(shard_map(body, mesh=_one_axis(), in_specs=P("x"), out_specs=P("x")))
    assert "psend[" in str(plax.make_jaxpr(f)(jnp.arange(8.0)))


def test_on_the_cpu_they_are_refused_as_in_jax():
    f = plax.jit(shard_map(_exchange(RING), mesh=_one_axis(), in_specs=P("x"),
                           out_specs=P("x")))
    with pytest.raises(NotImplementedError, match="psend is currently only implemented on GPU"):
        f(jnp.arange(8.0))


def test_cuda_lowering_sends_and_receives_on_one_channel_per_group():
    mesh = Mesh(np.array(plax.devices()[:8]).reshape(2, 4), ("a", "x"))
    f = plax.jit(shard_map(_exchange([(0, 1), (1, 0)]), mesh=mesh, in_specs=P(("a", "x")),
                           out_specs=P(("a", "x"))))
    text = export.export(f, platforms=["cuda"])(np.arange(16.0, dtype=np.float32)).mlir_module()
    pairs = "dense<[[0, 1], [1, 0], [4, 5], [5, 4]]> : tensor<4x2xi64>"
    send = [line for line in text.splitlines() if '"stablehlo.send"' in line]
    recv = [line for line in text.splitlines() if '"stablehlo.recv"' in line]
    assert len(send) == len(recv) == 1
    for line in send + recv:
        assert "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>" in line
        assert pairs in line
    assert "(tensor<2xf32>, !stablehlo.token) -> !stablehlo.token" in send[0]
    assert "(!stablehlo.token) -> (tensor<2xf32>, !stablehlo.token)" in recv[0]
    hlo = xla.stablehlo_to_hlo_text(text)
    assert " send(" in hlo and " recv(" in hlo and "channel_id=1" in hlo


def test_precv_after_a_created_token():
    def body(x):
        return lax.precv(lax.create_token(), plax.ShapeDtypeStruct((2,), np.int32), "x", RING)
    f = shard_map(body, mesh=_one_axis(), in_specs=P("x"), out_specs=P("x"))
    text = str(plax.make_jaxpr(f)(jnp.arange(8.0)))
    assert "create_token" in text and "out_shape=int32[2]" in text


@pytest.mark.parametrize("perm,match", [([(0, 1), (0, 2)], "sources and destinations must be "
                                                         "unique"),
                                        ([(0, 4)], "index outside the axis")])
def test_bad_permutations_are_refused(perm, match):
    f = shard_map(_exchange(perm), mesh=_one_axis(), in_specs=P("x"), out_specs=P("x"))
    with pytest.raises(ValueError, match=match):
        plax.make_jaxpr(f)(jnp.arange(8.0))


def test_precv_needs_a_token():
    def body(x):
        return lax.precv(x, plax.ShapeDtypeStruct((2,), np.float32), "x", RING)
    f = shard_map(body, mesh=_one_axis(), in_specs=P("x"), out_specs=P("x"))
    with pytest.raises(TypeError, match="precv takes a token"):
        plax.make_jaxpr(f)(jnp.arange(8.0))
