"""plax.experimental.buffer_callback: Python callbacks writing a program's results in place
through jaxlib's buffer-callback FFI target."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental.buffer_callback import (Buffer, ExecutionContext, ExecutionStage,
                                               buffer_callback)
from plax.runtime.xla import JaxRuntimeError


def _add_one(ctx, out, x):
    np.asarray(out)[...] = np.asarray(x) + 1


@pytest.mark.parametrize("jitted", [False, True])
def test_callback_writes_its_result_in_place(jitted):
    seen = []

    def callback(ctx, out, x):
        seen.append((type(ctx), ctx.stage, type(x), x.shape, x.dtype, x.writeable,
                     out.writeable))
        _add_one(ctx, out, x)
    x = jnp.arange(4, dtype=jnp.int32)
    f = buffer_callback(callback, plax.ShapeDtypeStruct.like(x))
    out = (plax.jit(f) if jitted else f)(x)
    assert out.dtype == jnp.int32 and out.tolist() == [1, 2, 3, 4]
    assert seen == [(ExecutionContext, ExecutionStage.EXECUTE, Buffer, (4,), np.int32,
                     False, True)]


def test_pytrees_of_arguments_keywords_and_results():
    def callback(ctx, out, a, *, b):
        np.asarray(out["sum"])[...] = np.asarray(a) + np.asarray(b)
        np.asarray(out["product"])[...] = np.asarray(a) * np.asarray(b)
    spec = plax.ShapeDtypeStruct((3,), jnp.float32)
    f = buffer_callback(callback, {"sum": spec, "product": spec})
    a = jnp.arange(3.0)
    out = plax.jit(f)(a, b=a + 1)
    assert out["sum"].tolist() == [1, 3, 5] and out["product"].tolist() == [0, 2, 6]


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_vmap_by_method(method):
    shapes = []

    def callback(ctx, out, x, y):
        shapes.append(x.shape)
        np.asarray(out)[...] = np.asarray(x) * 10 + np.asarray(y)
    n = 3 if method == "sequential" else None
    f = buffer_callback(callback, plax.ShapeDtypeStruct((2,), jnp.float32),
                        vmap_method=method)
    batched = plax.vmap(f, in_axes=(0, None))(jnp.arange(6.0).reshape(3, 2), jnp.ones(2))
    assert np.array_equal(np.asarray(batched), np.arange(6.0).reshape(3, 2) * 10 + 1)
    assert shapes == ([(2,)] * n if n else [(3, 2)])


def test_vmap_without_a_method_and_derivatives_are_refused():
    f = buffer_callback(_add_one, plax.ShapeDtypeStruct((2,), jnp.float32))
    with pytest.raises(NotImplementedError, match="vmap is only supported for the "
                                                  "buffer_callback primitive"):
        plax.vmap(f)(jnp.ones((3, 2)))
    with pytest.raises(ValueError, match="Buffer callbacks do not support JVP"):
        plax.grad(lambda x: f(x).sum())(jnp.ones(2))


def test_an_aliased_input_gives_its_buffer_to_the_output():
    def double(ctx, out, x):
        np.asarray(out)[...] = np.asarray(x) * 2
    f = buffer_callback(double, plax.ShapeDtypeStruct((4,), jnp.float32),
                        input_output_aliases={0: 0})
    assert plax.jit(f)(jnp.ones(4)).tolist() == [2, 2, 2, 2]
    text = plax.jit(f).lower(jnp.ones(4)).as_text()
    assert "xla_buffer_python_cpu_callback" in text and "output_operand_alias" in text
    with pytest.raises(ValueError, match=r"mapping '0:0' referring to an input with abstract "
                                         r"value float32\[3\] and an output"):
        f(jnp.ones(3))
    with pytest.raises(ValueError, match=r"mapping '1:0' with input index 1 outside"):
        buffer_callback(_add_one, plax.ShapeDtypeStruct((4,), jnp.float32),
                        input_output_aliases={1: 0})(jnp.ones(4))


def test_side_effects_keep_an_unused_call_and_errors_reach_the_caller():
    calls = []

    def callback(ctx, out, x):
        calls.append(1)
        _add_one(ctx, out, x)
    kept = buffer_callback(callback, plax.ShapeDtypeStruct((), jnp.float32),
                           has_side_effect=True)
    dropped = buffer_callback(callback, plax.ShapeDtypeStruct((), jnp.float32))

    def unused(f):
        def g(x):
            f(x)
            return x
        return plax.jit(g)
    assert float(unused(kept)(1.0)) == 1.0 and float(unused(dropped)(1.0)) == 1.0
    assert len(calls) == 1
    returns = buffer_callback(lambda ctx, out, x: 3, plax.ShapeDtypeStruct((), jnp.float32))
    with pytest.raises(JaxRuntimeError, match="must not return any values"):
        returns(1.0)
    # (its failure is XLA's error alone: a later host callback's failure is still its own)

    def boom(x):
        raise KeyError("the pure callback's own")
    with pytest.raises(KeyError, match="the pure callback's own"):
        plax.jit(lambda x: plax.pure_callback(boom, plax.ShapeDtypeStruct((), jnp.float32),
                                              x))(1.0).block_until_ready()
