"""lax.fft: the four transform types against numpy.fft, dtypes, errors, derivatives (all four
transposes), vmap, jit and the lowering (one stablehlo.fft; multi-dimensional IRFFT split up
on GPU)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core import rules
from plax.lowering.stablehlo import lower_jaxpr_to_module
from plax.test_util import check_grads

from helpers import C64, F32, check, check_vmap_axes, rand

C128, F64 = np.dtype(np.complex128), np.dtype(np.float64)
T = lax.FftType


def _reference(typ, x, lengths):
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    if typ == T.FFT:
        return np.fft.fftn(x, axes=axes)
    if typ == T.IFFT:
        return np.fft.ifftn(x, axes=axes)
    if typ == T.RFFT:
        return np.fft.rfftn(x, axes=axes)
    return np.fft.irfftn(x, s=lengths, axes=axes)


def _input_shape(typ, lead, lengths):
    if typ == T.IRFFT:
        return lead + lengths[:-1] + (lengths[-1] // 2 + 1,)
    return lead + lengths


# (lead dims, fft_lengths): 1-D, batched, odd and even lengths, 2-D and 3-D.
CASES = [((), (8,)), ((3,), (5,)), ((2,), (4, 6)), ((2,), (3, 4, 5)), ((), (3, 7))]


@pytest.mark.parametrize("typ", list(T), ids=lambda t: t.name)
@pytest.mark.parametrize("lead, lengths", CASES, ids=str)
def test_values_match_numpy(typ, lead, lengths):
    dtype = F32 if typ == T.RFFT else C64
    x = rand(_input_shape(typ, lead, lengths), dtype, seed=len(lengths))
    out = lax.fft(x, typ, lengths)
    want_dtype = C64 if typ != T.IRFFT else F32
    check(out, _reference(typ, x.astype(np.result_type(x, np.float64)), lengths), want_dtype,
          weak=False, rtol=1e-5)


@pytest.mark.parametrize("typ", list(T), ids=lambda t: t.name)
def test_values_in_64_bits(typ):
    with plax.enable_x64():
        lengths = (4, 5)
        dtype = F64 if typ == T.RFFT else C128
        x = rand(_input_shape(typ, (2,), lengths), dtype, seed=3)
        out = lax.fft(x, typ, lengths)
        check(out, _reference(typ, x, lengths), F64 if typ == T.IRFFT else C128, rtol=1e-12)


def test_inputs_are_converted_as_in_jax():
    ints = np.arange(6, dtype=np.int32)
    check(lax.fft(ints, "fft", (6,)), np.fft.fft(ints), C64)
    check(lax.fft(ints, "rfft", (6,)), np.fft.rfft(ints), C64)
    check(lax.fft(np.array([True, False]), "fft", (2,)), [1, 1], C64)
    halves = np.ones(4, np.float16)
    check(lax.fft(halves, "fft", (4,)), [4, 0, 0, 0], C64)
    halfspec = np.arange(3, dtype=np.float32)
    check(lax.fft(halfspec, "irfft", (4,)), np.fft.irfft(halfspec, 4), F32)
    out = lax.fft(2.0, "fft", ())  # no lengths: only the conversion; never weak
    check(out, 2.0, C64, weak=False)
    with plax.enable_x64():
        assert lax.fft(np.arange(4), "fft", (4,)).dtype == C128  # int64
        assert lax.fft(np.arange(4, dtype=np.int32), "rfft", (4,)).dtype == C64
        assert lax.fft(np.ones(4), "rfft", (4,)).dtype == C128


def test_type_spellings_and_enum():
    x = rand((6,), C64)
    want = np.asarray(lax.fft(x, T.IFFT, (6,)))
    for spelling in ("ifft", "IFFT"):
        np.testing.assert_array_equal(np.asarray(lax.fft(x, spelling, [6])), want)
    assert [t.name for t in T] == ["FFT", "IFFT", "RFFT", "IRFFT"]
    assert [int(t) for t in T] == [0, 1, 2, 3] and T.RFFT == 2


@pytest.mark.parametrize("args, exc, match", [
    ((rand((4,), C64), "rfft", (4,)), ValueError, "only real valued inputs supported for rfft"),
    ((rand((4,)), "fourier", (4,)), ValueError, "Unknown FFT type 'fourier'"),
    ((rand((4,)), 0, (4,)), TypeError, "Unknown FFT type value '0'"),
    ((rand((2, 2, 2, 2), C64), "fft", (2, 2, 2, 2)), ValueError, "1 to 3 trailing dimensions"),
    ((rand((4, 8)), "fft", (2, 4, 8)), ValueError,
     r"FFT input shape \(4, 8\) must have at least as many input dimensions"),
    ((rand((4, 8)), "fft", (7,)), ValueError,
     r"FFT input shape \(4, 8\) minor dimensions must be equal to fft_lengths \(7,\)"),
    ((rand((4, 8)), "rfft", (4, 7)), ValueError, "RFFT input shape .* minor dimensions"),
    ((np.ones(4, np.float16), "rfft", (4,)), ValueError,
     "RFFT input must be float32 or float64, got float16"),
    ((rand((4, 5), C64), "irfft", (3, 8)), ValueError, r"IRFFT input shape \(4, 5\) minor"),
    ((rand((4, 5), C64), "irfft", (4, 12)), ValueError, r"fft_lengths\[-1\] // 2 \+ 1 = 7"),
    ((rand((4,)), "fft", (-4,)), ValueError, "must be non-negative"),
    ((rand((4,)), "fft", 4), TypeError, "fft_lengths must be a sequence of integers"),
])
def test_errors(args, exc, match):
    with pytest.raises(exc, match=match):
        lax.fft(*args)


def test_primitive_checks_dtypes_itself():
    with pytest.raises(ValueError, match="FFT input must be complex64 or complex128, got float32"):
        lax.fft_p.bind(jnp.ones(4), fft_type=T.FFT, fft_lengths=(4,))
    with pytest.raises(ValueError, match="IRFFT input must be complex64 or complex128"):
        lax.fft_p.bind(jnp.ones(3), fft_type=T.IRFFT, fft_lengths=(4,))
    with pytest.raises(TypeError, match="fft does not accept dtype key"):
        lax.fft(plax.random.key(0), "fft", ())


def test_empty_transforms():
    check(lax.fft(np.ones((3, 0), np.complex64), "fft", (0,)), np.ones((3, 0)), C64)
    check(lax.fft(np.ones((0, 4), np.float32), "rfft", (0, 4)), np.ones((0, 3)), C64)
    check(lax.fft(np.ones((3, 0), np.float32), "rfft", (0,)), np.zeros((3, 1)), C64)  # one zero bin
    check(lax.fft(np.ones((3, 1), np.complex64), "irfft", (0,)), np.ones((3, 0)), F32)


# --- derivatives ------------------------------------------------------------------------------
GRAD_CASES = [(T.FFT, (3,), (4,)), (T.FFT, (), (3, 4)), (T.IFFT, (2,), (5,)),
              (T.IFFT, (), (2, 3, 4)), (T.RFFT, (2,), (6,)), (T.RFFT, (), (3, 5)),
              (T.RFFT, (), (2, 3, 4)), (T.IRFFT, (2,), (6,)), (T.IRFFT, (2,), (7,)),
              (T.IRFFT, (), (3, 4)), (T.IRFFT, (), (2, 3, 5))]


@pytest.mark.parametrize("typ, lead, lengths", GRAD_CASES, ids=str)
def test_grads_every_type_both_modes(typ, lead, lengths):
    """The transposes: reverse mode against forward mode and finite differences (order 2
    also transposes the transpose rules). IRFFT inputs are not Hermitian: the imaginary
    parts IRFFT ignores must get zero cotangents."""
    dtype = F32 if typ == T.RFFT else C64
    x = rand(_input_shape(typ, lead, lengths), dtype, seed=5)
    check_grads(lambda v: lax.fft(v, typ, lengths), (x,), 2, modes=("fwd", "rev"), eps=1e-2)


def test_grads_in_64_bits():
    with plax.enable_x64():
        for typ, lengths in [(T.RFFT, (4, 6)), (T.IRFFT, (4, 6)), (T.IRFFT, (5,))]:
            dtype = F64 if typ == T.RFFT else C128
            x = rand(_input_shape(typ, (2,), lengths), dtype, seed=6)
            check_grads(lambda v: lax.fft(v, typ, lengths), (x,), 1, modes=("fwd", "rev"))


def test_grad_closed_forms():
    x = rand((8,))
    # Parseval: sum |FFT x|^2 = n sum x^2, so its gradient is 2 n x.
    g = plax.grad(lambda v: jnp.sum(jnp.abs(lax.fft(v, "fft", (8,))) ** 2))(x)
    np.testing.assert_allclose(np.asarray(g), 16 * x, rtol=1e-5)
    # The IRFFT of a half spectrum read as a sum: d/dY_k of sum(irfft(Y)) is 1 at k = 0 only.
    y = rand((5,), C64)
    g = plax.grad(lambda v: jnp.sum(lax.fft(v, "irfft", (8,))))(y)
    np.testing.assert_allclose(np.asarray(g), [1, 0, 0, 0, 0], atol=1e-6)


def test_ignored_parts_get_no_cotangent():
    """IRFFT reads only the real part of the zero-frequency and Nyquist bins."""
    y = rand((2, 5), C64)
    _, vjp = plax.vjp(lambda v: lax.fft(v, "irfft", (8,)), y)
    (ct,) = vjp(rand((2, 8), seed=1))
    np.testing.assert_allclose(np.imag(np.asarray(ct))[:, [0, 4]], 0, atol=1e-7)


# --- vmap and jit -----------------------------------------------------------------------------
@pytest.mark.parametrize("typ", list(T), ids=lambda t: t.name)
def test_vmap(typ):
    """The batch at axis 0, 1 and -1: in front of the transformed dims it stays put, among
    them it moves to the front."""
    lengths = (4, 6)
    dtype = F32 if typ == T.RFFT else C64
    xs = rand((3,) + _input_shape(typ, (2,), lengths), dtype, seed=7)
    check_vmap_axes(lambda v: lax.fft(v, typ, lengths), xs, rtol=1e-5)


def test_vmap_of_grad():
    xs = rand((3, 6), seed=8)
    per_example = plax.grad(lambda v: jnp.sum(jnp.abs(lax.fft(v, "rfft", (6,))) ** 2))
    check_vmap_axes(per_example, xs, rtol=1e-5)


def test_jit_jaxpr_and_lowering():
    x = rand((2, 4, 8))
    f = plax.jit(lambda v: lax.fft(v, T.RFFT, (4, 8)))
    np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(lax.fft(x, T.RFFT, (4, 8))))
    eqn = plax.make_jaxpr(f)(x).jaxpr.eqns[0].params["jaxpr"].jaxpr.eqns[0]
    assert eqn.primitive is lax.fft_p and eqn.primitive.name == "fft"
    assert eqn.params == {"fft_type": T.RFFT, "fft_lengths": (4, 8)}
    assert str(eqn.outvars[0].aval) == "complex64[2,4,5]"
    text = f.lower(x).as_text()
    assert "fft_type = #stablehlo<fft_type RFFT>, fft_length = array<i64: 4, 8>" in text


def test_multi_dimensional_irfft_is_split_up_on_gpu(monkeypatch):
    """cuFFT's C2R assumes Hermitian symmetry in every dimension: on GPU an IRFFT over several
    dimensions lowers to an IFFT of the outer ones and a 1-D IRFFT. The same ops, run here,
    agree with NumPy on input that is not Hermitian."""
    y = rand((2, 3, 4, 5), C64, seed=9)
    f = lambda v: lax.fft(v, T.IRFFT, (3, 4, 8))  # noqa: E731
    cuda = lower_jaxpr_to_module(plax.make_jaxpr(f)(y).jaxpr, platform="cuda")
    assert "fft_type IFFT>, fft_length = array<i64: 3, 4>" in cuda
    assert "fft_type IRFFT>, fft_length = array<i64: 8>" in cuda
    assert "array<i64: 3, 4, 8>" not in cuda
    one_dim = lower_jaxpr_to_module(plax.make_jaxpr(lambda v: lax.fft(v, T.IRFFT, (8,)))(y).jaxpr,
                                    platform="cuda")
    assert one_dim.count("stablehlo.fft") == 1 and "stablehlo.transpose" not in one_dim
    per_platform = rules.platform_lowering_rules[lax.fft_p]
    monkeypatch.setitem(per_platform, "cpu", per_platform["cuda"])
    g = plax.jit(lambda v: lax.fft(v, T.IRFFT, (3, 4, 8)) + 0)
    assert "fft_type IFFT" in g.lower(y).as_text()
    out = g(y)
    check(out, np.fft.irfftn(y, s=(3, 4, 8), axes=(1, 2, 3)), F32, rtol=1e-5)
