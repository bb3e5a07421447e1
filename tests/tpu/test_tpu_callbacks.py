"""Host callbacks lowered for TPUs (from the CPU): as JAX's, each operand is sent to the host
and each result received from it (stablehlo.send / recv host transfers, which jaxlib's TPU
client serves with the Python function), not the CPU's FFI callback custom call."""
import re

import numpy as np
import pytest

import plax
from plax.experimental import io_callback
from plax.runtime import xla

X = np.arange(3, dtype=np.float32)


def _lowered(f, *args):
    low = plax.jit(f).trace(*args).lower(lowering_platforms=("tpu",))
    return low.as_text(), list(low._text.host_callbacks)


def _transfers(text):
    """(op, channel, kind) of every host transfer, in program order."""
    found = re.findall(r'"stablehlo\.(send|recv)".*?handle = (\d+), type = (\d)', text)
    assert text.count('_xla_host_transfer_handler_name = "pjrt_rendezvous"') == len(found)
    return [(op, int(ch), int(kind)) for op, ch, kind in found]


def test_pure_callback_sends_its_operands_and_receives_its_results():
    def f(x, n):
        spec = (plax.ShapeDtypeStruct(x.shape, x.dtype), plax.ShapeDtypeStruct((), np.int32))
        return plax.pure_callback(lambda a, b: (np.sin(a) * 2, np.int32(b + 1)), spec, x, n)
    text, (cb,) = _lowered(f, X, np.int32(4))
    assert "xla_ffi_python" not in text and "custom_call" not in text
    assert _transfers(text) == [("send", 1, 2), ("send", 2, 2), ("recv", 3, 3),
                                ("recv", 4, 3)]
    assert (cb.send_channels, cb.recv_channels) == ((1, 2), (3, 4))
    assert cb.sent == (((3,), np.float32), ((), np.int32))
    assert cb.received == (((3,), np.float32), ((), np.int32))
    a, b = cb.fn(X, np.int32(4))
    np.testing.assert_allclose(a, np.sin(X) * 2, rtol=1e-6)
    assert b == 5 and b.dtype == np.int32
    # jaxlib's client makes the host callback the TPU program is compiled with
    assert xla.host_transfer_callback(plax.devices()[0].client, cb) is not None


def test_a_callback_without_operands_sends_a_dummy():
    f = lambda: plax.pure_callback(lambda: np.float32(7), plax.ShapeDtypeStruct((), np.float32))
    text, (cb,) = _lowered(f)
    assert cb.sent == (((1,), np.float32),) and cb.received == (((), np.float32),)
    assert re.search(r'"stablehlo\.send"\(%\w+, %\w+\).*\(tensor<1xf32>, !stablehlo.token\)',
                     text)
    (out,) = cb.fn(np.zeros(1, np.float32))  # the dummy is not passed on
    assert out == 7


def test_empty_results_are_constants_and_not_received():
    spec = (plax.ShapeDtypeStruct((0, 2), np.float32), plax.ShapeDtypeStruct((2,), np.int32))

    def f(x):
        return plax.pure_callback(lambda a: (np.zeros((0, 2), np.float32),
                                             np.array([1, 2], np.int32)), spec, x)
    text, (cb,) = _lowered(f, X)
    assert cb.received == (((2,), np.int32),)
    assert [op for op, _, _ in _transfers(text)] == ["send", "recv"]
    assert "dense<> : tensor<0x2xf32>" in text
    (kept,) = cb.fn(X)
    np.testing.assert_array_equal(kept, [1, 2])


def test_debug_print_waits_for_the_host_with_a_dummy_result(capsys):
    def f(x):
        plax.debug.print("x={}", x)
        return x + 1
    text, (cb,) = _lowered(f, X)
    assert cb.received == (((), np.float32),)
    assert [op for op, _, _ in _transfers(text)] == ["send", "recv"]
    (done,) = cb.fn(X)
    assert done == 0 and "x=[0. 1. 2.]" in capsys.readouterr().out


def test_an_ordered_io_callback_threads_the_programs_token():
    def f(x):
        io_callback(lambda a: None, None, x, ordered=True)
        return io_callback(lambda a: a * 3, plax.ShapeDtypeStruct(x.shape, x.dtype), x,
                           ordered=True)
    text, cbs = _lowered(f, X)
    assert len(cbs) == 2
    main = text[text.index("@main"):]
    assert "%arg_token: !stablehlo.token" in main
    # the first send takes the program's token; the next callback starts from the last recv
    sends = re.findall(r'"stablehlo\.send"\(%\w+, (%[\w#]+)\)', main)
    recvs = re.findall(r'(%\w+):2 = "stablehlo\.recv"', main)
    assert sends[0] == "%arg_token" and sends[1] == recvs[0] + "#1"
    assert "stablehlo.create_token" not in main
    np.testing.assert_allclose(cbs[1].fn(X)[0], X * 3)


def test_compiled_for_the_cpu_the_callbacks_stay_ffi_calls():
    f = lambda x: plax.pure_callback(np.cos, plax.ShapeDtypeStruct(x.shape, x.dtype), x)
    text = plax.jit(f).trace(X).lower().as_text()
    assert "xla_ffi_python_cpu_callback" in text and "stablehlo.send" not in text
    np.testing.assert_allclose(plax.jit(f)(X), np.cos(X), rtol=1e-6)


def test_a_callback_that_returns_the_wrong_shape_is_reported_on_the_host():
    f = lambda x: plax.pure_callback(lambda a: a[:2], plax.ShapeDtypeStruct(x.shape, x.dtype),
                                     x)
    _, (cb,) = _lowered(f, X)
    with pytest.raises(RuntimeError, match="shape"):
        cb.fn(X)
