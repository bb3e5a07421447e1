"""plax.ffi: a C++ kernel built here against jaxlib's headers, registered and called.

The kernels (below, compiled once per session with the system C++ compiler) are small and
their results are checked against NumPy: eagerly, under jit, under vmap with every
vmap_method, under grad through a custom_vjp, with attributes of every kind, layouts,
aliases, side effects and the older custom-call API.
"""
import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import ffi
from plax.errors import JaxRuntimeError
from plax.runtime import xla
from plax.test_util import check_grads

from helpers import grad_check_defaults

KERNELS = r"""
#include <cmath>
#include <cstdint>
#include <string>
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using F32 = ffi::Buffer<ffi::F32>;
using OutF32 = ffi::ResultBuffer<ffi::F32>;

// y = a * x + b; a an f32 attribute, b an f64 one.
static ffi::Error ScaledAddImpl(float a, double b, F32 x, OutF32 y) {
  for (size_t i = 0; i < x.element_count(); ++i)
    y->typed_data()[i] = a * x.typed_data()[i] + static_cast<float>(b);
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(ScaledAdd, ScaledAddImpl,
    ffi::Ffi::Bind().Attr<float>("a").Attr<double>("b").Arg<F32>().Ret<F32>());

// Each row (last dimension) over its root mean square; leading dimensions are rows.
static ffi::Error RmsNormImpl(float eps, F32 x, OutF32 y) {
  if (eps < 0) return ffi::Error(ffi::ErrorCode::kInvalidArgument, "rms_norm: eps must be >= 0");
  auto dims = x.dimensions();
  size_t n = dims.back(), total = x.element_count();
  for (size_t r = 0; r < total / n; ++r) {
    double ss = 0;
    const float* row = x.typed_data() + r * n;
    for (size_t i = 0; i < n; ++i) ss += double(row[i]) * row[i];
    float scale = 1.0f / std::sqrt(float(ss / n) + eps);
    for (size_t i = 0; i < n; ++i) y->typed_data()[r * n + i] = x.typed_data()[r * n + i] * scale;
  }
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(RmsNorm, RmsNormImpl,
    ffi::Ffi::Bind().Attr<float>("eps").Arg<F32>().Ret<F32>());

// Output row i = x row (i mod rows of x) + v row (i mod rows of v): rows broadcast.
static ffi::Error RowAddImpl(F32 x, F32 v, OutF32 y) {
  size_t n = y->dimensions().back();
  size_t rows = y->element_count() / n, rx = x.element_count() / n, rv = v.element_count() / n;
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < n; ++i)
      y->typed_data()[r * n + i] =
          x.typed_data()[(r % rx) * n + i] + v.typed_data()[(r % rv) * n + i];
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(RowAdd, RowAddImpl,
    ffi::Ffi::Bind().Arg<F32>().Arg<F32>().Ret<F32>());

// Two results: 2 x, and the sum of x.
static ffi::Error TwiceAndSumImpl(F32 x, OutF32 twice, OutF32 total) {
  float s = 0;
  for (size_t i = 0; i < x.element_count(); ++i) {
    twice->typed_data()[i] = 2 * x.typed_data()[i];
    s += x.typed_data()[i];
  }
  total->typed_data()[0] = s;
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(TwiceAndSum, TwiceAndSumImpl,
    ffi::Ffi::Bind().Arg<F32>().Ret<F32>().Ret<F32>());

// What the attributes arrived as: [i, f, flag, len(name), sum(weights), u8].
static ffi::Error AttrsImpl(int64_t i, double f, bool flag, std::string_view name,
                            ffi::Span<const int32_t> weights, uint8_t u8,
                            ffi::ResultBuffer<ffi::F64> out) {
  double* o = out->typed_data();
  double s = 0;
  for (int32_t w : weights) s += w;
  o[0] = double(i); o[1] = f; o[2] = flag; o[3] = double(name.size()); o[4] = s; o[5] = u8;
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(Attrs, AttrsImpl,
    ffi::Ffi::Bind().Attr<int64_t>("i").Attr<double>("f").Attr<bool>("flag")
        .Attr<std::string_view>("name").Attr<ffi::Span<const int32_t>>("weights")
        .Attr<uint8_t>("u8").Ret<ffi::Buffer<ffi::F64>>());

// Counts its calls (Python reads the counter through ctypes); y = x + 1.
extern "C" { int64_t plax_test_calls = 0; }
static ffi::Error CountImpl(F32 x, OutF32 y) {
  ++plax_test_calls;
  for (size_t i = 0; i < x.element_count(); ++i) y->typed_data()[i] = x.typed_data()[i] + 1;
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(Count, CountImpl, ffi::Ffi::Bind().Arg<F32>().Ret<F32>());

// A user type for register_ffi_type: XLA writes the id it assigns into plax_test_type_id.
static void DeleteNothing(void*) {}
extern "C" {
XLA_FFI_TypeId plax_test_type_id = {0};
XLA_FFI_TypeInfo plax_test_type_info = {sizeof(XLA_FFI_TypeInfo), nullptr, DeleteNothing};

// The older custom-call API (status returning, unified): y = x * float(opaque), 4 values.
void plax_legacy_scale(void* out, const void** in, const char* opaque, size_t opaque_len,
                       void* status) {
  double k = std::stod(std::string(opaque, opaque_len));
  for (int i = 0; i < 4; ++i)
    static_cast<float*>(out)[i] = float(static_cast<const float*>(in[0])[i] * k);
}
}
"""

HANDLERS = ("ScaledAdd", "RmsNorm", "RowAdd", "TwiceAndSum", "Attrs", "Count")


def _compiler():
    return next((c for c in ("g++", "c++", "clang++") if shutil.which(c)), None)


@pytest.fixture(scope="session")
def kernels(tmp_path_factory):
    """The kernel library (built once per session) with its handlers registered as
    plax_test_<Name>; the legacy kernel as plax_test_legacy."""
    cxx = _compiler()
    if cxx is None:
        pytest.skip("no C++ compiler (g++, c++ or clang++) is installed: the FFI tests build "
                    "their kernel with one")
    where = tmp_path_factory.mktemp("ffi")
    source, lib = where / "kernels.cc", where / "kernels.so"
    source.write_text(KERNELS)
    subprocess.run([cxx, "-shared", "-fPIC", "-std=c++17", "-O1", "-w",
                    f"-I{ffi.include_dir()}", str(source), "-o", str(lib)],
                   check=True, capture_output=True)
    lib = ctypes.cdll.LoadLibrary(str(lib))
    for name in HANDLERS:
        ffi.register_ffi_target(f"plax_test_{name}", ffi.pycapsule(getattr(lib, name)))
    ffi.register_ffi_target("plax_test_legacy", ffi.pycapsule(lib.plax_legacy_scale),
                            api_version=0)
    return lib


def _like(x):
    return plax.ShapeDtypeStruct(np.shape(x), np.float32)


def scaled_add(x, a, b):
    return ffi.ffi_call("plax_test_ScaledAdd", _like(x))(x, a=np.float32(a), b=float(b))


def rms_norm_call(x, eps=1e-5, vmap_method="broadcast_all", **kw):
    return ffi.ffi_call("plax_test_RmsNorm", _like(x), vmap_method=vmap_method,
                        **kw)(x, eps=np.float32(eps))


def rms_norm_np(x, eps=1e-5, axis=-1):
    x = np.asarray(x, np.float64)
    return x / np.sqrt(np.mean(x * x, axis=axis, keepdims=True) + eps)


def test_include_dir_holds_the_ffi_headers():
    assert os.path.isfile(os.path.join(ffi.include_dir(), "xla", "ffi", "api", "ffi.h"))


@pytest.mark.parametrize("shape,a,b", [((5,), 2.0, 0.5), ((2, 3), -1.5, 3.0), ((), 0.25, -1.0),
                                       ((4, 0), 1.0, 1.0)])
@pytest.mark.parametrize("jitted", [False, True])
def test_scaled_add_eager_and_jit(kernels, shape, a, b, jitted):
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    f = plax.jit(scaled_add, static_argnums=(1, 2)) if jitted else scaled_add
    out = f(x, a, b)
    assert out.dtype == np.float32 and out.shape == shape
    np.testing.assert_allclose(out, np.float32(a) * x + np.float32(b), rtol=1e-6)


def test_attributes_of_every_kind_arrive_exactly(kernels):
    call = ffi.ffi_call("plax_test_Attrs", plax.ShapeDtypeStruct((6,), np.float64))
    out = call(i=7, f=0.1, flag=True, name="hello", weights=np.array([1, 2, 3], np.int32),
               u8=np.uint8(9))
    np.testing.assert_array_equal(out, [7, 0.1, 1, 5, 6, 9])  # 0.1 as an exact f64
    out = plax.jit(lambda: call(i=-3, f=-2.5, flag=False, name="", weights=np.zeros(0, np.int32),
                                u8=np.uint8(255)))()
    np.testing.assert_array_equal(out, [-3, -2.5, 0, 0, 0, 255])


@pytest.mark.parametrize("value,text", [
    (1, "1 : i64"), (True, "true"), (np.int8(-2), "-2 : i8"), (np.uint16(7), "7 : ui16"),
    (1.5, "0x3FF8000000000000 : f64"), (np.float32(1.5), "0x3FC00000 : f32"),
    ("a\"b", '"a\\22b"'), (np.dtype(np.float32), "f32"), ((1, "x"), '[1 : i64, "x"]'),
    ({"k": 2, "j": False}, "{j = false, k = 2 : i64}"),
    (np.array([1, 2], np.int32), 'dense<"0x0100000002000000"> : tensor<2xi32>')])
def test_attribute_text_follows_jax_conversions(value, text):
    from plax.ffi.custom_call import attribute_text
    assert attribute_text(value) == text


@pytest.mark.parametrize("value,error,match", [
    (1j, TypeError, "Unsupported scalar attribute type"),
    (np.broadcast_to(np.float32(1), (3,)), ValueError, "zero strides"),
    (object(), TypeError, "No attribute handler defined for type")])
def test_bad_attributes_are_refused(value, error, match):
    from plax.ffi.custom_call import attribute_text
    with pytest.raises(error, match=match):
        attribute_text(value)


def test_a_list_attribute_is_unhashable(kernels):
    with pytest.raises(TypeError, match="Non-hashable keyword argument to ffi_call w"):
        scaled_call = ffi.ffi_call("plax_test_ScaledAdd", _like(np.ones(2)))
        scaled_call(np.ones(2, np.float32), w=[1, 2])


@pytest.mark.parametrize("vmap_method", ["sequential", "sequential_unrolled", "expand_dims",
                                         "broadcast_all", "legacy_vectorized"])
def test_vmap_methods_with_a_batched_and_an_unbatched_operand(kernels, vmap_method):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3,)).astype(np.float32)        # unbatched
    vs = rng.normal(size=(4, 3)).astype(np.float32)     # batched over axis 0
    call = ffi.ffi_call("plax_test_RowAdd", _like(x), vmap_method=vmap_method)
    for f in (plax.vmap(call, in_axes=(None, 0)), plax.jit(plax.vmap(call, in_axes=(None, 0)))):
        np.testing.assert_allclose(f(x, vs), x + vs, rtol=1e-6)
    # batched along a later axis, and nested vmap
    np.testing.assert_allclose(plax.vmap(call, in_axes=(None, 1))(x, vs.T), x + vs, rtol=1e-6)
    ws = rng.normal(size=(2, 4, 3)).astype(np.float32)
    nested = plax.vmap(plax.vmap(call, in_axes=(None, 0)), in_axes=(None, 0))
    np.testing.assert_allclose(nested(x, ws), x + ws, rtol=1e-6)


def test_sequential_vmap_is_a_loop_of_single_calls(kernels):
    jaxpr = plax.make_jaxpr(plax.vmap(lambda v: rms_norm_call(v, vmap_method="sequential")))(
        np.ones((4, 3), np.float32))
    assert [e.primitive.name for e in jaxpr.eqns] == ["scan"]
    inner = jaxpr.eqns[0].params["jaxpr"]
    assert [e.primitive.name for e in inner.eqns] == ["ffi_call"]
    assert inner.eqns[0].outvars[0].aval.shape == (3,)


@pytest.mark.parametrize("vmap_method", ["broadcast_all", "sequential"])
def test_rms_norm_rows_under_vmap(kernels, vmap_method):
    x = np.random.default_rng(2).normal(size=(5, 2, 3)).astype(np.float32)
    out = plax.vmap(lambda v: rms_norm_call(v, vmap_method=vmap_method))(x)
    np.testing.assert_allclose(out, rms_norm_np(x), rtol=1e-5)


def test_vmap_without_a_vmap_method_is_refused(kernels):
    with pytest.raises(NotImplementedError, match="vmap is only supported for the ffi_call"):
        plax.vmap(lambda v: rms_norm_call(v, vmap_method=None))(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="vmap_method must be on of the allowed methods"):
        ffi.ffi_call("plax_test_RmsNorm", _like(np.ones(3)), vmap_method="vectorized")


def test_an_ffi_call_is_not_differentiable(kernels):
    with pytest.raises(ValueError, match="cannot be differentiated"):
        plax.grad(lambda v: rms_norm_call(v).sum())(np.ones(3, np.float32))


@plax.custom_vjp
def rms_norm(x):
    return rms_norm_call(x)


def _rms_fwd(x):
    y = rms_norm_call(x)
    return y, (x, y)


def _rms_bwd(res, g):
    x, y = res
    n = x.shape[-1]
    ms = jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5
    # d(x / sqrt(ms)) = g / sqrt(ms) - x * sum(g * x) / (n * ms^1.5)
    return (g / jnp.sqrt(ms) - x * jnp.sum(g * x, axis=-1, keepdims=True) / (n * ms ** 1.5),)


rms_norm.defvjp(_rms_fwd, _rms_bwd)


def test_grad_through_a_custom_vjp(kernels):
    x = np.random.default_rng(3).normal(size=(2, 4)).astype(np.float32)
    check_grads(rms_norm, (x,), order=1, modes=("rev",), **grad_check_defaults(np.float32))
    loss = lambda v: jnp.sum(rms_norm(v) * jnp.arange(4.0))
    g = plax.jit(plax.grad(loss))(x)
    eps = 1e-3
    num = np.zeros_like(x, dtype=np.float64)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        num[idx] = (np.sum(rms_norm_np(x + d) * np.arange(4.0)) -
                    np.sum(rms_norm_np(x - d) * np.arange(4.0))) / (2 * eps)
    np.testing.assert_allclose(g, num, atol=5e-3)
    # and under vmap of the gradient (the forward call batched by its vmap_method)
    per_row = plax.vmap(plax.grad(loss))(x[:, None, :])
    np.testing.assert_allclose(per_row[:, 0, :], g, rtol=1e-5, atol=1e-6)


def test_a_kernel_error_is_raised_in_python(kernels):
    # (XLA's own error type, as JAX raises it: plax does not wrap errors of a running program)
    with pytest.raises(xla.XlaRuntimeError, match="eps must be >= 0"):
        np.asarray(rms_norm_call(np.ones(3, np.float32), eps=-1.0))
    # the error XLA raises at run time is jax.errors.JaxRuntimeError itself (as in JAX)
    with pytest.raises(JaxRuntimeError, match="eps must be >= 0"):
        np.asarray(plax.jit(lambda x: rms_norm_call(x, eps=-1.0))(np.ones(3, np.float32)))


def test_side_effects_keep_an_unused_call(kernels):
    counter = ctypes.c_int64.in_dll(kernels, "plax_test_calls")
    x = np.ones(3, np.float32)

    def unused(effect):
        def f(v):
            ffi.ffi_call("plax_test_Count", _like(v), has_side_effect=effect)(v)
            return v * 2
        return f

    jaxpr = plax.make_jaxpr(unused(True))(x)
    assert {str(e) for e in jaxpr.effects} == {"FFI"}
    assert not plax.make_jaxpr(unused(False))(x).effects
    before = counter.value
    plax.jit(unused(True))(x).block_until_ready()
    assert counter.value == before + 1
    plax.jit(unused(False))(x).block_until_ready()  # pure and unused: dropped
    assert counter.value == before + 1
    np.testing.assert_array_equal(ffi.ffi_call("plax_test_Count", _like(x))(x), x + 1)
    assert counter.value == before + 2


@pytest.mark.parametrize("as_type", [list, tuple])
def test_several_results_come_back_as_the_sequence_given(kernels, as_type):
    x = np.arange(5, dtype=np.float32)
    shapes = as_type([_like(x), plax.ShapeDtypeStruct((), np.float32)])
    out = plax.jit(lambda v: ffi.ffi_call("plax_test_TwiceAndSum", shapes)(v))(x)
    assert type(out) is as_type
    np.testing.assert_array_equal(out[0], 2 * x)
    assert float(out[1]) == 10.0


def test_layouts_are_major_to_minor(kernels):
    x = np.random.default_rng(4).normal(size=(3, 4)).astype(np.float32)
    from plax.experimental.layout import Layout
    for ins, outs in [([(1, 0)], (1, 0)), ([Layout((1, 0))], Layout((1, 0)))]:
        # column-major buffers: the kernel normalises runs of 4 values of column-major memory
        out = rms_norm_call(x, input_layouts=ins, output_layouts=outs)
        runs = rms_norm_np(x.ravel(order="F").reshape(-1, 4))
        np.testing.assert_allclose(out, runs.ravel().reshape(x.shape, order="F"), rtol=1e-5)
    text = plax.jit(lambda v: rms_norm_call(v, input_layouts=[(1, 0)])).lower(x).as_text()
    assert "operand_layouts = [dense<[0, 1]> : tensor<2xindex>]" in text
    with pytest.raises(ValueError, match=r"number of input arguments \(1\) must equal"):
        rms_norm_call(x, input_layouts=[None, None])
    with pytest.raises(ValueError, match="must order each of its dimensions"):
        rms_norm_call(x, input_layouts=[(0, 0)])


def test_input_output_aliases(kernels):
    x = np.arange(4, dtype=np.float32)
    call = ffi.ffi_call("plax_test_ScaledAdd", _like(x), input_output_aliases={0: 0})
    out = plax.jit(lambda v: call(v + 0, a=np.float32(3), b=1.0))(x)
    np.testing.assert_array_equal(out, 3 * x + 1)
    assert "output_operand_alias" in plax.jit(lambda v: call(v, a=np.float32(3), b=1.0)) \
        .lower(x).as_text()
    with pytest.raises(ValueError, match="with input index 2 outside the range"):
        ffi.ffi_call("plax_test_ScaledAdd", _like(x), input_output_aliases={2: 0})(x)
    with pytest.raises(ValueError, match="different abstract value"):
        ffi.ffi_call("plax_test_ScaledAdd", plax.ShapeDtypeStruct((2,), np.float32),
                     input_output_aliases={0: 0})(x)


def test_the_older_custom_call_api(kernels):
    x = np.arange(4, dtype=np.float32)
    call = ffi.ffi_call("plax_test_legacy", _like(x), custom_call_api_version=3,
                        legacy_backend_config="2.5")
    np.testing.assert_array_equal(plax.jit(call)(x), 2.5 * x)
    with pytest.raises(ValueError, match="requires a custom call API version of at least 4"):
        call(x, k=1)
    with pytest.raises(ValueError, match="legacy_backend_config parameter requires"):
        ffi.ffi_call("plax_test_legacy", _like(x), legacy_backend_config="1")


def test_bad_result_shape_dtypes_and_unknown_targets():
    with pytest.raises(ValueError, match="must have 'shape' and 'dtype' attributes"):
        ffi.ffi_call("plax_test_RmsNorm", 3)
    from plax.lowering.stablehlo import abstract_token
    with pytest.raises(NotImplementedError, match="is a token"):
        ffi.ffi_call("plax_test_RmsNorm", [_like(np.ones(2)), abstract_token])
    with pytest.raises(JaxRuntimeError, match="plax_test_no_such_target"):
        ffi.ffi_call("plax_test_no_such_target", _like(np.ones(2)))(np.ones(2, np.float32))


def test_ffi_lowering_for_a_librarys_primitive(kernels):
    from plax.extend.core import Primitive
    from plax.interpreters import mlir

    prim = Primitive("plax_test_scaled_add")
    prim.def_abstract_eval(lambda x, **params: x)
    mlir.register_lowering(prim, ffi.ffi_lowering("plax_test_ScaledAdd"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    f = plax.jit(lambda v: prim.bind(v, a=np.float32(2), b=0.5))
    np.testing.assert_array_equal(f(x), 2 * x + 0.5)
    np.testing.assert_array_equal(prim.bind(x, a=np.float32(2), b=0.5), 2 * x + 0.5)  # eager
    text = f.lower(x).as_text()
    assert "stablehlo.custom_call" in text and "func.call" not in text  # plax's own rule

    # The same call from a rule written with jaxlib's MLIR bindings.
    bprim = Primitive("plax_test_scaled_add_bindings")
    bprim.def_abstract_eval(lambda x, **params: x)
    lowering = ffi.ffi_lowering("plax_test_ScaledAdd")

    def rule(ctx, v, *, scale):
        return lowering(ctx, v, a=np.float32(scale), b=-1.0)

    mlir.register_lowering(bprim, rule)
    g = plax.jit(lambda v: bprim.bind(v, scale=3.0))
    np.testing.assert_array_equal(g(x), 3 * x - 1)
    assert "func.call" in g.lower(x).as_text()  # built with the bindings, spliced in
    with pytest.raises(TypeError, match="unsupported arguments"):
        ffi.ffi_lowering("plax_test_ScaledAdd", no_such_option=1)


def test_register_ffi_type_assigns_the_type_id(kernels):
    type_id = ctypes.c_int64.in_dll(kernels, "plax_test_type_id")
    info = ctypes.c_int64.in_dll(kernels, "plax_test_type_info")
    plax.devices()  # the CPU client registers types once it exists
    ffi.register_ffi_type("plax_test_type", {"type_id": ffi.pycapsule(ctypes.addressof(type_id)),
                                             "type_info": ffi.pycapsule(ctypes.addressof(info))})
    assert type_id.value != 0
    with pytest.raises(ValueError, match="not supported after jaxlib version 381"):
        ffi.register_ffi_type_id("plax_test_type", ffi.pycapsule(ctypes.addressof(type_id)))
    ffi.register_ffi_target_as_batch_partitionable("plax_test_RmsNorm")  # accepted by XLA
    with pytest.raises(ValueError, match="non-null"):
        ffi.pycapsule(0)
