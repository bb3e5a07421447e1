"""lax.conv_general_dilated and its wrappers against a NumPy reference written out with loops:
layouts, strides, padding kinds, dilations, feature and batch groups, dtypes; conv_transpose;
gradients (both operands, both modes); vmap of either or both operands; errors; sharding."""
import itertools

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core.sharding_types import ShardingTypeError
from plax.sharding import PartitionSpec as P
from plax.test_util import check_grads

from tests.helpers import check_vmap, rand

NHWC = ("NHWC", "HWIO", "NHWC")


# --- the reference ------------------------------------------------------------------------------
def conv_reference(lhs, rhs, strides, padding, lhs_dilation=None, rhs_dilation=None,
                   dnums=None, feature_group_count=1, batch_group_count=1):
    """The convolution spelled out: dilate and pad the lhs (negative padding crops), then for
    every output position and kernel tap add the group's (batch, in) x (in, out) product.
    Groups are contiguous: feature group g takes lhs features [g I, (g + 1) I), batch group b
    takes lhs batch entries [b Nb, (b + 1) Nb); both take the g-th slice of the kernel's output
    features. Computed in float64/complex128."""
    nd = np.ndim(lhs)
    iota = tuple(range(nd))
    lhs_spec, rhs_spec, out_spec = dnums or (iota, iota, iota)
    wide = np.complex128 if np.iscomplexobj(lhs) else np.float64
    x = np.transpose(np.asarray(lhs), lhs_spec).astype(wide)  # (N, C, spatial...)
    w = np.transpose(np.asarray(rhs), rhs_spec).astype(wide)  # (O, I, spatial...)
    ns = nd - 2
    ldil = lhs_dilation or (1,) * ns
    rdil = rhs_dilation or (1,) * ns
    xd = np.zeros(x.shape[:2] + tuple((s - 1) * a + 1 for s, a in zip(x.shape[2:], ldil)), wide)
    xd[(slice(None), slice(None)) + tuple(slice(None, None, a) for a in ldil)] = x
    for ax, (lo, hi) in enumerate(padding, start=2):
        xd = np.take(xd, range(max(-lo, 0), xd.shape[ax] - max(-hi, 0)), axis=ax)
        widths = [(0, 0)] * nd
        widths[ax] = (max(lo, 0), max(hi, 0))
        xd = np.pad(xd, widths)
    ksize = w.shape[2:]
    kdil = tuple((k - 1) * r + 1 for k, r in zip(ksize, rdil))
    out_space = tuple(max(0, (p - k) // s + 1) for p, k, s in zip(xd.shape[2:], kdil, strides))
    groups = max(feature_group_count, batch_group_count)
    n, o, i = x.shape[0], w.shape[0], w.shape[1]
    nb, og = n // batch_group_count, o // groups
    out = np.zeros((nb, o) + out_space, wide)
    for pos in itertools.product(*map(range, out_space)):
        for k in itertools.product(*map(range, ksize)):
            at = tuple(p * s + kk * r for p, s, kk, r in zip(pos, strides, k, rdil))
            patch, tap = xd[(slice(None), slice(None)) + at], w[(slice(None), slice(None)) + k]
            for g in range(groups):
                xs = patch[g * nb:(g + 1) * nb] if batch_group_count > 1 else \
                    patch[:, g * i:(g + 1) * i]
                out[(slice(None), slice(g * og, (g + 1) * og)) + pos] += \
                    xs @ tap[g * og:(g + 1) * og].T
    return np.transpose(out, np.argsort(out_spec))


def _explicit(lhs_shape, rhs_shape, strides, padding, rhs_dilation, dimension_numbers):
    if not isinstance(padding, str):
        return padding
    d = lax.conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    rdil = rhs_dilation or (1,) * len(strides)
    kernel = [(rhs_shape[a] - 1) * r + 1 for a, r in zip(d.rhs_spec[2:], rdil)]
    return lax.padtype_to_pads([lhs_shape[a] for a in d.lhs_spec[2:]], kernel, strides, padding)


def _check(lhs, rhs, strides, padding, lhs_dilation=None, rhs_dilation=None, dn=None, fgc=1,
           bgc=1, tol=2e-5, **kw):
    out = lax.conv_general_dilated(lhs, rhs, strides, padding, lhs_dilation, rhs_dilation, dn,
                                   fgc, bgc, **kw)
    pads = _explicit(np.shape(lhs), np.shape(rhs), strides, padding, rhs_dilation, dn)
    dnums = lax.conv_dimension_numbers(np.shape(lhs), np.shape(rhs), dn)
    want = conv_reference(lhs, rhs, strides, pads, lhs_dilation, rhs_dilation, dnums, fgc, bgc)
    assert out.shape == want.shape, (out.shape, want.shape)
    np.testing.assert_allclose(np.asarray(out).astype(want.dtype), want, rtol=tol, atol=tol)
    return out


# lhs shape, rhs shape, strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
# feature_group_count, batch_group_count
CASES = {
    "1d-valid": ((2, 3, 7), (4, 3, 3), (1,), "VALID", None, None, None, 1, 1),
    "1d-same-stride": ((2, 3, 8), (4, 3, 3), (2,), "SAME", None, None, None, 1, 1),
    "1d-same-lower-rhs-dil": ((2, 3, 7), (4, 3, 2), (2,), "SAME_LOWER", None, (3,), None, 1, 1),
    "1d-negative-pad-lhs-dil": ((2, 3, 7), (4, 3, 3), (2,), ((-2, 3),), (2,), None, None, 1, 1),
    "2d-nchw-explicit": ((2, 3, 6, 5), (4, 3, 3, 2), (1, 2), ((1, 0), (2, 2)), None, None, None,
                         1, 1),
    "2d-nhwc-groups-rhs-dil": ((2, 7, 6, 4), (3, 2, 2, 6), (1, 1), ((1, 1), (2, 0)), None,
                               (2, 1), NHWC, 2, 1),
    "2d-depthwise-multiplier": ((2, 5, 5, 3), (3, 3, 1, 6), (1, 2), ((2, 2), (1, 2)), (2, 1),
                                (1, 2), NHWC, 3, 1),
    "2d-depthwise-same": ((2, 4, 5, 5), (4, 1, 3, 3), (2, 2), "SAME", None, None, None, 4, 1),
    "2d-batch-groups": ((4, 3, 5, 5), (6, 3, 2, 2), (1, 2), "VALID", None, None, None, 1, 2),
    "2d-mixed-layouts-batch-groups": ((6, 5, 4, 2), (2, 3, 2, 6), (2, 1), "SAME",
                                      None, None, ("NHWC", "HWIO", "NCHW"), 1, 3),
    "2d-odd-layout": ((3, 5, 2, 4), (2, 3, 2, 4), (1, 1), "SAME", None, None,
                      ("HNCW", "IHOW", "WCNH"), 1, 1),
    "3d-ncdhw": ((2, 2, 4, 5, 3), (3, 2, 2, 3, 2), (1, 2, 1), "SAME", None, (1, 1, 2), None, 1, 1),
    "3d-ndhwc-stride": ((1, 5, 4, 4, 2), (3, 2, 2, 2, 4), (2, 1, 2), "VALID", None, None,
                        ("NDHWC", "DHWIO", "NDHWC"), 1, 1),
    "0d-dense": ((3, 4), (5, 4), (), (), None, None, None, 1, 1),
    "empty-output": ((2, 3, 5), (4, 3, 3), (1,), ((-2, -1),), None, None, None, 1, 1),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_values_match_the_reference(case):
    ls, rs, strides, pad, ldil, rdil, dn, fgc, bgc = CASES[case]
    out = _check(rand(ls, seed=1), rand(rs, seed=2), strides, pad, ldil, rdil, dn, fgc, bgc)
    assert out.dtype == np.float32


@pytest.mark.parametrize("case", ["2d-nhwc-groups-rhs-dil", "2d-batch-groups", "3d-ncdhw"])
def test_float64_under_x64(case):
    ls, rs, strides, pad, ldil, rdil, dn, fgc, bgc = CASES[case]
    with plax.enable_x64():
        out = _check(rand(ls, np.float64, 1), rand(rs, np.float64, 2), strides, pad, ldil, rdil,
                     dn, fgc, bgc, tol=1e-12)
        assert out.dtype == np.float64


def test_complex_integer_and_bool_values():
    ls, rs, strides, pad, ldil, rdil, dn, fgc, bgc = CASES["2d-nhwc-groups-rhs-dil"]
    out = _check(rand(ls, np.complex64, 1), rand(rs, np.complex64, 2), strides, pad, ldil, rdil,
                 dn, fgc, bgc, tol=1e-4)
    assert out.dtype == np.complex64
    x, w = rand((2, 3, 6), np.int32, 1), rand((4, 3, 3), np.int32, 2)
    out = lax.conv(x, w, (2,), ((1, 1),))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), conv_reference(x, w, (2,), ((1, 1),)))
    b = lax.conv(x > 0, w > 0, (1,), "VALID")
    assert b.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(b), conv_reference(x > 0, w > 0, (1,), ((0, 0),)) > 0)


def test_preferred_element_type_and_precision():
    x, w = rand((2, 3, 6), np.int8, 1), rand((4, 3, 3), np.int8, 2)
    out = lax.conv(x, w, (1,), "VALID", preferred_element_type=np.int32)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), conv_reference(x, w, (1,), ((0, 0),)))
    bf = np.dtype(ml_dtypes.bfloat16)
    xb, wb = rand((2, 3, 6)).astype(bf), rand((4, 3, 3)).astype(bf)
    out = lax.conv(xb, wb, (1,), "VALID", preferred_element_type=np.float32)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), conv_reference(xb, wb, (1,), ((0, 0),)),
                               rtol=1e-5, atol=1e-5)  # exact products, f32 sums
    x32, w32 = rand((2, 3, 6)), rand((4, 3, 3))
    with plax.enable_x64():
        assert lax.conv(x32, w32, (1,), "SAME", preferred_element_type=np.float64).dtype == \
            np.float64
    jaxpr = str(plax.make_jaxpr(lambda a, b: lax.conv(a, b, (1,), "SAME", precision="highest"))(
        x32, w32))
    assert "precision=(Precision.HIGHEST, Precision.HIGHEST)" in jaxpr
    text = plax.jit(lambda a, b: lax.conv(a, b, (1,), "SAME", precision="highest")).lower(
        x32, w32).as_text()
    assert "#stablehlo<precision HIGHEST>" in text


def test_jit_jaxpr_and_lowering():
    x, w = rand((2, 7, 6, 4), seed=1), rand((3, 2, 2, 6), seed=2)

    def f(a, b):
        return lax.conv_general_dilated(a, b, (1, 2), "SAME", rhs_dilation=(2, 1),
                                        dimension_numbers=NHWC, feature_group_count=2)
    np.testing.assert_allclose(np.asarray(plax.jit(f)(x, w)), np.asarray(f(x, w)), rtol=1e-6)
    jaxpr = str(plax.make_jaxpr(f)(x, w))
    assert ("dimension_numbers=ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), "
            "out_spec=(0, 3, 1, 2))") in jaxpr
    assert "feature_group_count=2" in jaxpr and "padding=((2, 2), (0, 0))" in jaxpr
    text = plax.jit(f).lower(x, w).as_text()
    assert "#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>" in text
    assert "padding = dense<[[2, 2], [0, 0]]> : tensor<2x2xi64>" in text
    assert "window_strides = array<i64: 1, 2>" in text and "rhs_dilation = array<i64: 2, 1>" in text


# --- dimension numbers and wrappers ---------------------------------------------------------------
def test_conv_dimension_numbers():
    d = lax.conv_dimension_numbers((2, 7, 6, 4), (3, 2, 2, 6), NHWC)
    assert isinstance(d, lax.ConvDimensionNumbers) and isinstance(d, tuple)
    assert d == ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    assert d._fields == ("lhs_spec", "rhs_spec", "out_spec")
    assert lax.conv_dimension_numbers((1,) * 4, (1,) * 4, None) == ((0, 1, 2, 3),) * 3
    assert lax.conv_dimension_numbers((1,) * 4, (1,) * 4, d) == d
    # spatial dimensions follow the rhs spec's order
    assert lax.conv_general_permutations(("NCHW", "OIWH", "NCWH")) == \
        ((0, 1, 3, 2), (0, 1, 2, 3), (0, 1, 2, 3))
    assert lax.conv_general_shape_tuple((2, 3, 7, 6), (4, 3, 3, 2), (2, 1), "SAME",
                                        ("NCHW", "OIHW", "NHWC")) == (2, 4, 6, 4)
    assert lax.conv_shape_tuple((4, 3, 7), (6, 3, 3), (2,), ((1, 0),), 2) == (2, 6, 3)


def test_wrappers():
    x, w = rand((2, 3, 7, 6), seed=1), rand((4, 3, 3, 2), seed=2)
    np.testing.assert_allclose(np.asarray(lax.conv(x, w, (2, 1), "VALID")),
                               conv_reference(x, w, (2, 1), ((0, 0), (0, 0))), rtol=2e-5, atol=2e-5)
    out = lax.conv_with_general_padding(x, w, (1, 2), ((1, -1), (0, 2)), (2, 1), (1, 2))
    np.testing.assert_allclose(np.asarray(out),
                               conv_reference(x, w, (1, 2), ((1, -1), (0, 2)), (2, 1), (1, 2)),
                               rtol=2e-5, atol=2e-5)


# --- conv_transpose -----------------------------------------------------------------------------
def _transpose_pads(k, s, padding):
    """The transposed convolution's own padding for forward 'SAME'/'VALID' (or forward pairs):
    a full-overlap ('VALID') or centred ('SAME') output of size about n * s."""
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else (total + 1) // 2
        return lo, total - lo
    if padding == "VALID":
        return k - 1, k + s - 2 + max(k - s, 0) - (k - 1)
    return k - 1 - padding[0], k - 1 - padding[1]


def transpose_reference(x, w, strides, pads, rhs_dilation):
    """Channels-last fractionally strided convolution by scattering (no kernel flip): input
    position ``i`` and kernel tap ``j`` add ``x[i] w[j]`` to output ``i s - j r + lo``;
    what lands outside the output is dropped."""
    ns = x.ndim - 2
    kd = [(k - 1) * r + 1 for k, r in zip(w.shape[:ns], rhs_dilation)]
    size = [(n - 1) * s + 1 + lo + hi - k + 1
            for n, s, (lo, hi), k in zip(x.shape[1:-1], strides, pads, kd)]
    out = np.zeros((x.shape[0], *size, w.shape[-1]))
    for i in itertools.product(*map(range, x.shape[1:-1])):
        for j in itertools.product(*map(range, w.shape[:ns])):
            at = tuple(ii * s - jj * r + lo
                       for ii, s, jj, r, (lo, _) in zip(i, strides, j, rhs_dilation, pads))
            if all(0 <= a < sz for a, sz in zip(at, size)):
                out[(slice(None),) + at] += x[(slice(None),) + i] @ w[j]
    return out


@pytest.mark.parametrize("lhs,rhs,strides,padding,rhs_dilation,consistent", [
    ((2, 7, 3), (3, 3, 4), (2,), "SAME", (1,), False),
    ((2, 5, 3), (4, 3, 2), (3,), "VALID", (1,), False),
    ((2, 6, 3), (2, 3, 4), (2,), "SAME", (2,), False),
    ((2, 5, 3), (3, 3, 4), (2,), ((1, 2),), (1,), False),
    ((2, 5, 3), (3, 3, 4), (2,), ((1, 0),), (1,), True),
    ((1, 3, 4, 2), (2, 3, 2, 3), (2, 1), "SAME", (1, 1), False),
])
def test_conv_transpose_matches_scattering(lhs, rhs, strides, padding, rhs_dilation, consistent):
    x, w = rand(lhs, seed=1), rand(rhs, seed=2)
    out = lax.conv_transpose(x, w, strides, padding, rhs_dilation=rhs_dilation,
                             use_consistent_padding=consistent)
    kd = [(k - 1) * r + 1 for k, r in zip(rhs[:-2], rhs_dilation)]
    if isinstance(padding, str):
        pads = [_transpose_pads(k, s, padding) for k, s in zip(kd, strides)]
    elif consistent:
        pads = [_transpose_pads(k, s, p) for k, s, p in zip(kd, strides, padding)]
    else:
        pads = padding
    want = transpose_reference(x, w, strides, pads, rhs_dilation)
    assert out.shape == want.shape
    np.testing.assert_allclose(np.asarray(out), want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_conv_transpose_with_transpose_kernel_is_the_forward_gradient(padding):
    x, w = rand((2, 8, 6, 3), seed=1), rand((3, 3, 3, 4), seed=2)  # NHWC, HWIO: 3 -> 4

    def forward(a):
        return lax.conv_general_dilated(a, w, (2, 2), padding, dimension_numbers=NHWC)
    y, vjp = plax.vjp(forward, x)
    ct = rand(y.shape, seed=3)
    out = lax.conv_transpose(ct, w, (2, 2), padding, transpose_kernel=True)
    want = np.asarray(vjp(ct)[0])
    # a forward 'VALID' conv drops trailing inputs; conv_transpose yields the covered part
    got = np.asarray(out)
    assert got.shape[1] <= want.shape[1] and got.shape[2] <= want.shape[2]
    np.testing.assert_allclose(got, want[:, :got.shape[1], :got.shape[2]], rtol=2e-5, atol=2e-5)


# --- derivatives --------------------------------------------------------------------------------
GRAD_CASES = ["1d-negative-pad-lhs-dil", "2d-nhwc-groups-rhs-dil", "2d-depthwise-multiplier",
              "2d-batch-groups", "2d-mixed-layouts-batch-groups", "0d-dense"]


@pytest.mark.parametrize("case", GRAD_CASES)
def test_gradients_of_both_operands(case):
    ls, rs, strides, pad, ldil, rdil, dn, fgc, bgc = CASES[case]

    def f(x, w):
        return lax.conv_general_dilated(x, w, strides, pad, ldil, rdil, dn, fgc, bgc)
    with plax.enable_x64():
        x, w = rand(ls, np.float64, 1), rand(rs, np.float64, 2)
        check_grads(f, (x, w), order=1, modes=("fwd", "rev"))
        check_grads(lambda x: f(x, w), (x,), order=2, modes=("rev",))


def test_gradients_in_float32_and_complex():
    x, w = rand((2, 3, 8), seed=1), rand((6, 1, 3), seed=2)
    check_grads(lambda x, w: lax.conv_general_dilated(x, w, (2,), "SAME", rhs_dilation=(2,),
                                                      feature_group_count=3),
                (x, w), order=1, modes=("fwd", "rev"), atol=5e-2, rtol=5e-2)
    with plax.enable_x64():
        xc, wc = rand((2, 3, 6), np.complex128, 1), rand((4, 3, 2), np.complex128, 2)
        check_grads(lambda x, w: lax.conv(x, w, (2,), "SAME"), (xc, wc), order=1,
                    modes=("fwd", "rev"))


def test_gradient_of_a_bf16_conv_with_f32_accumulation():
    bf = np.dtype(ml_dtypes.bfloat16)
    x, w = rand((2, 3, 6)).astype(bf), rand((4, 3, 3)).astype(bf)

    def loss(x, w):
        return jnp.sum(lax.conv(x, w, (1,), "SAME", preferred_element_type=np.float32))
    gx, gw = plax.grad(loss, argnums=(0, 1))(x, w)
    assert gx.dtype == bf and gw.dtype == bf
    gx32, gw32 = plax.grad(lambda x, w: jnp.sum(lax.conv(x, w, (1,), "SAME")), argnums=(0, 1))(
        x.astype(np.float32), w.astype(np.float32))
    np.testing.assert_allclose(np.asarray(gx, np.float32), np.asarray(gx32), rtol=2e-2, atol=5e-2)
    np.testing.assert_allclose(np.asarray(gw, np.float32), np.asarray(gw32), rtol=2e-2, atol=5e-2)


# --- vmap ---------------------------------------------------------------------------------------
VMAP_CASES = ["1d-same-stride", "2d-nhwc-groups-rhs-dil", "2d-batch-groups",
              "2d-mixed-layouts-batch-groups"]


@pytest.mark.parametrize("case", VMAP_CASES)
@pytest.mark.parametrize("axes", [(0, 0), (0, None), (None, 0), (2, 1)],
                         ids=["both", "lhs", "rhs", "both-inner-axes"])
def test_vmap(case, axes):
    ls, rs, strides, pad, ldil, rdil, dn, fgc, bgc = CASES[case]

    def f(x, w):
        return lax.conv_general_dilated(x, w, strides, pad, ldil, rdil, dn, fgc, bgc)
    args = [rand(s, seed=k) if a is None else np.moveaxis(rand((3,) + s, seed=k), 0, a)
            for k, (s, a) in enumerate(zip((ls, rs), axes))]
    check_vmap(f, *args, in_axes=axes, rtol=1e-4)


def test_vmap_of_gradients():
    x, w = rand((3, 2, 3, 7), seed=1), rand((3, 4, 3, 3), seed=2)

    def loss(x, w):
        return jnp.sum(jnp.sin(lax.conv(x, w, (2,), "SAME")))
    check_vmap(plax.grad(loss, argnums=(0, 1)), x, w, rtol=1e-4)


# --- errors ---------------------------------------------------------------------------------------
def test_errors():
    x, w = np.ones((2, 3, 5, 5), np.float32), np.ones((4, 3, 2, 2), np.float32)
    conv = lax.conv_general_dilated
    with pytest.raises(ValueError, match="lhs feature dimension size divided by "
                                         "feature_group_count must equal the rhs input feature"):
        conv(x, np.ones((4, 2, 2, 2), np.float32), (1, 1), "SAME")
    with pytest.raises(ValueError, match="feature_group_count must divide lhs feature dimension"):
        conv(x, w, (1, 1), "VALID", feature_group_count=2)
    with pytest.raises(ValueError, match="rhs output feature dimension size must be a multiple "
                                         "of feature_group_count"):
        conv(np.ones((2, 6, 5, 5)), np.ones((3, 3, 2, 2)), (1, 1), "VALID", feature_group_count=2)
    with pytest.raises(ValueError, match="batch_group_count must divide lhs batch dimension"):
        conv(x, w, (1, 1), "VALID", batch_group_count=3)
    with pytest.raises(ValueError, match="rhs output feature dimension size must be a multiple "
                                         "of batch_group_count"):
        conv(np.ones((3, 3, 5, 5)), np.ones((4, 3, 2, 2)), (1, 1), "VALID", batch_group_count=3)
    with pytest.raises(ValueError, match="At most one of batch_group_count and feature_group_co"):
        conv(np.ones((2, 6, 5, 5)), np.ones((4, 3, 2, 2)), (1, 1), "VALID", feature_group_count=2,
             batch_group_count=2)
    with pytest.raises(ValueError, match="feature_group_count must be a positive integer"):
        conv(x, w, (1, 1), "VALID", feature_group_count=0)
    with pytest.raises(TypeError, match="requires arguments to have the same dtypes"):
        conv(x, w.astype(np.float16), (1, 1), "SAME")
    with pytest.raises(TypeError, match="convolution requires lhs and rhs ndim to be equal"):
        conv(x, w[0], (1, 1), "SAME")
    with pytest.raises(ValueError, match="needs operands of rank at least 2"):
        conv(np.ones(3), np.ones(3), (), "VALID")
    with pytest.raises(ValueError, match="window and window_strides must have the same number"):
        conv(x, w, (1,), "SAME")
    with pytest.raises(TypeError, match="window_strides must be positive"):
        conv(x, w, (0, 1), "VALID")
    with pytest.raises(TypeError, match="All dilations must be positive"):
        conv(x, w, (1, 1), "VALID", rhs_dilation=(0, 1))
    with pytest.raises(ValueError, match="String padding is not implemented for transposed"):
        conv(x, w, (1, 1), "VALID", lhs_dilation=(2, 1))
    with pytest.raises(RuntimeError, match="Unrecognized padding type"):
        conv(x, w, (1, 1), "FULL")
    with pytest.raises(TypeError, match="Wrong number of explicit pads for convolution"):
        conv(x, w, (1, 1), [(1, 1)])
    with pytest.raises(ValueError, match="should be a string or a sequence of \\(low, high\\)"):
        conv(x, w, (1, 1), [(1, 1, 1), (1, 1)])
    with pytest.raises(ValueError, match="Negative padding is larger than the size"):
        conv(x, w, (1, 1), [(-4, -4), (0, 0)])
    with pytest.raises(TypeError, match="must not be narrower than the original type"):
        conv(x, w, (1, 1), "VALID", preferred_element_type=np.float16)
    with pytest.raises(TypeError, match="Input type is incompatible with `preferred_element_typ"):
        conv(x, w, (1, 1), "VALID", preferred_element_type=np.int32)
    with pytest.raises(TypeError, match="must have the same signedness"):
        conv(x.astype(np.int8), w.astype(np.int8), (1, 1), "VALID",
             preferred_element_type=np.uint16)


def test_dimension_number_errors():
    x, w = np.ones((2, 3, 5, 5), np.float32), np.ones((4, 3, 2, 2), np.float32)
    conv = lax.conv_general_dilated
    with pytest.raises(TypeError, match="dimension_numbers list/tuple must be length 3"):
        conv(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO"))
    with pytest.raises(TypeError, match=r"dimension_numbers\[0\] must have len equal to the ndim"):
        conv(x, w, (1, 1), "SAME", dimension_numbers=("NHC", "HWIO", "NHWC"))
    with pytest.raises(TypeError, match=r"dimension_numbers\[1\] must contain the characters 'O' "
                                        "and 'I' exactly once"):
        conv(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWOO", "NHWC"))
    with pytest.raises(TypeError, match="must each have the same set of spatial characters"):
        conv(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HDIO", "NHWC"))
    with pytest.raises(TypeError, match="dimension_numbers elements must be strings"):
        conv(x, w, (1, 1), "SAME", dimension_numbers=((0, 1, 2, 3),) * 3)
    with pytest.raises(TypeError, match="dimension_numbers must be tuple/list or None"):
        conv(x, w, (1, 1), "SAME", dimension_numbers=5)
    with pytest.raises(TypeError, match=r"out_spec must be a permutation of range\(4\)"):
        conv(x, w, (1, 1), "SAME",
             dimension_numbers=lax.ConvDimensionNumbers((0, 1, 2, 3), (0, 1, 2, 3), (0, 1, 2, 2)))
    with pytest.raises(ValueError, match="No 4\\+ dimensional dimension_number defaults"):
        lax.conv_transpose(np.ones((1,) * 6), np.ones((1,) * 6), (1,) * 4, "SAME")


# --- sharding in types --------------------------------------------------------------------------
@pytest.mark.needs_devices(8)
def test_sharding_keeps_the_batch_split_and_refuses_ambiguous_ones():
    mesh = plax.make_mesh((2, 4), ("x", "y"))
    xs, ws = rand((8, 4, 4, 4), seed=1), rand((2, 2, 4, 4), seed=2)

    def f(a, b, **kw):
        return lax.conv_general_dilated(a, b, (1, 1), "SAME", dimension_numbers=NHWC, **kw)
    with plax.set_mesh(mesh):
        x, w = plax.device_put(xs, P("x")), plax.device_put(ws, P())
        out = f(x, w)
        assert str(plax.typeof(out)) == "float32[8@x,4,4,4]"
        np.testing.assert_allclose(np.asarray(out), np.asarray(f(xs, ws)), rtol=1e-6)
        loss = lambda a, b: jnp.sum(f(a, b) ** 2)
        gx, gw = plax.jit(plax.grad(loss, argnums=(0, 1)))(x, w)
        assert str(plax.typeof(gx)) == "float32[8@x,4,4,4]"
        assert str(plax.typeof(gw)) == "float32[2,2,4,4]"
        want = plax.grad(loss, argnums=(0, 1))(xs, ws)
        np.testing.assert_allclose(np.asarray(gw), np.asarray(want[1]), rtol=1e-4)
        with pytest.raises(ShardingTypeError, match="does not split spatial dimensions"):
            f(plax.device_put(xs, P(None, "y")), w)
        split_kernel = plax.device_put(ws, P(None, None, None, "y"))
        with pytest.raises(ShardingTypeError, match="Please specify the output sharding via the "
                                                    "`out_sharding` parameter"):
            f(x, split_kernel)
        out = f(x, split_kernel, out_sharding=P("x", None, None, "y"))
        assert str(plax.typeof(out)) == "float32[8@x,4,4,4@y]"
