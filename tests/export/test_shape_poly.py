"""Shape polymorphism in plax.export: symbolic dimensions, their arithmetic and comparisons,
and functions exported once for every batch size."""
import re

import numpy as np
import pytest
import scipy.special

import plax
import plax.numpy as jnp
from plax import export
from plax.errors import InconclusiveDimensionOperation

W = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
B, = export.symbolic_shape("b")


# --- the dimension expressions -----------------------------------------------------------------
@pytest.mark.parametrize("expr, text", [
    (lambda b: b + 1, "b + 1"), (lambda b: 2 * b, "2*b"), (lambda b: b - 1, "b - 1"),
    (lambda b: 3 - b, "- b + 3"), (lambda b: b * b, "b^2"), (lambda b: b // 2, "floordiv(b, 2)"),
    (lambda b: b % 2, "mod(b, 2)"), (lambda b: (2 * b + 2) // 2, "b + 1"),
    (lambda b: (4 * b) % 2, "0"), (lambda b: b - b, "0"),
    # terms print in JAX's order: larger ones first, names descending, the constant last
    (lambda b: (b + 2) * (b + 1), "b^2 + 3*b + 2"), (lambda b: b * b * 3 // b, "3*b"),
    (lambda b: (b * b + 24 * b) % b, "0"), (lambda b: (b + 13) // b, "floordiv(b + 13, b)"),
    (lambda b: (b + 13) % b, "mod(b + 13, b)"), (lambda b: (2 * b + 1) // 2, "b"),
    (lambda b: (2 * b + 1) % 2, "1"), (lambda b: (b * b - 1) // (b + 1), "b - 1"),
])
def test_arithmetic(expr, text):
    assert str(expr(B)) == text


@pytest.mark.parametrize("expr, value", [
    (lambda b: b >= 1, True), (lambda b: b > 0, True), (lambda b: b + 1 > b, True),
    (lambda b: 2 * b >= b, True), (lambda b: b // 2 >= 0, True), (lambda b: b < 1, False),
    (lambda b: b == b + 0, True), (lambda b: 2 * b == b * 2, True), (lambda b: b == 3, False),
    (lambda b: b != 3, True), (lambda b: b % 3 < 3, True),
])
def test_decidable_comparisons(expr, value):
    assert expr(B) is value


@pytest.mark.parametrize("expr", [lambda b: b > 3, lambda b: b < 3, lambda b: b >= 2,
                                  lambda b: int(b), lambda b: range(b)])
def test_undecidable_comparisons_raise(expr):
    with pytest.raises(InconclusiveDimensionOperation, match="inconclusive|requires a constant"):
        expr(B)


def test_several_variables_print_in_jax_order_and_parse_back():
    a, b, c = export.symbolic_shape("a, b, c")
    for e, text in [(a + 2 * b, "2*b + a"), (a + b + c, "c + b + a"), (2 * a + b, "b + 2*a"),
                    (a * b + a * a + b, "a*b + a^2 + b"), (c * c, "c^2"), (4 - a, "- a + 4"),
                    (a % 5 + b, "mod(a, 5) + b"), (b * a * a + 12, "a^2*b + 12")]:
        assert str(e) == text
        assert export.symbolic_shape(text, scope=a.scope) == (e,)


def test_parsing_and_constraints():
    assert export.symbolic_shape("(b, 4)", scope=B.scope) == (B, 4)
    assert export.symbolic_shape(" b , 4 ", scope=B.scope) == (B, 4)
    b2, c = export.symbolic_shape("2*b + 1, max(b, 4)", scope=B.scope)
    assert (b2 - 1) // 2 == B and str(c) == "max(b, 4)"
    k, = export.symbolic_shape("k", constraints=["k >= 4"])
    assert k >= 4 and (k > 3) is True
    with pytest.raises(InconclusiveDimensionOperation):
        k >= 5
    with pytest.raises(ValueError, match="syntax error in symbolic shape"):
        export.symbolic_shape("b, 4+")
    c_, = export.symbolic_shape("c")
    with pytest.raises(ValueError, match="Invalid mixing of symbolic scopes"):
        B + c_
    assert export.is_symbolic_dim(B) and not export.is_symbolic_dim(3)


def test_symbolic_args_specs():
    specs = export.symbolic_args_specs([np.ones((3, 4)), np.ones((3,), np.int32)], "b, ...")
    assert [str(s.shape[0]) for s in specs] == ["b", "b"] and specs[0].shape[1] == 4
    assert specs[0].shape[0] == specs[1].shape[0]  # one scope
    assert specs[1].dtype == np.int32
    assert str(plax.ShapeDtypeStruct(specs[0].shape, np.float32)) == \
        "ShapeDtypeStruct(shape=(b, 4), dtype=float32)"


# --- exported functions of a symbolic batch --------------------------------------------------
def _ref_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _pair_max(x):
    return plax.lax.reduce_window(x, -np.inf, plax.lax.max, (1, 2), (1, 1), "VALID")


def _ref_pair_max_grad(x):
    right = x[:, 1:] > x[:, :-1]
    g = np.zeros_like(x)
    g[:, :-1] += ~right
    g[:, 1:] += right
    return g


def _row_window(size):
    return lambda r, s: plax.lax.dynamic_slice(r, (s,), (size,))


def _row_starts(x):
    return (2 * (x[:, 0] > 0.5)).astype(jnp.int32)


def _np_starts(x):
    return (2 * (x[:, 0] > 0.5)).astype(np.int32)


CASES = {
    "elementwise": (lambda x: jnp.tanh(x) * x + 1, lambda x: np.tanh(x) * x + 1),
    "matmul": (lambda x: x @ W, lambda x: x @ W),
    "sum_batch": (lambda x: x.sum(0), lambda x: x.sum(0)),
    "mean": (jnp.mean, np.mean),
    "mean_batch": (lambda x: jnp.mean(x, axis=0), lambda x: x.mean(0)),
    "var_batch": (lambda x: jnp.var(x, axis=0), lambda x: x.var(0)),
    "reshape_flat": (lambda x: x.reshape(-1), lambda x: x.reshape(-1)),
    "reshape_batch": (lambda x: x.reshape(x.shape[0], 2, 2), lambda x: x.reshape(-1, 2, 2)),
    "reshape_minus1": (lambda x: x.reshape((-1, 2)), lambda x: x.reshape((-1, 2))),
    "concat_batch": (lambda x: jnp.concatenate([x, 2 * x]), lambda x: np.concatenate([x, 2 * x])),
    "concat_features": (lambda x: jnp.concatenate([x, x], 1), lambda x: np.concatenate([x, x], 1)),
    "arange": (lambda x: x + jnp.arange(x.shape[0])[:, None],
               lambda x: x + np.arange(x.shape[0])[:, None]),
    "slice_tail": (lambda x: x[1:], lambda x: x[1:]),
    "slice_head": (lambda x: x[:3], lambda x: x[:3]),
    "slice_inner": (lambda x: x[1:-1], lambda x: x[1:-1]),
    "first_row": (lambda x: x[0], lambda x: x[0]),
    "shape_value": (lambda x: x * jnp.shape(x)[0], lambda x: x * x.shape[0]),
    "divide_by_batch": (lambda x: x / x.shape[0], lambda x: x / x.shape[0]),
    "zeros": (lambda x: jnp.zeros(x.shape) + jnp.ones_like(x), lambda x: np.ones_like(x)),
    "softmax": (lambda x: plax.nn.softmax(x, axis=-1), _ref_softmax),
    "gram": (lambda x: x.T @ x, lambda x: x.T @ x),
    "where": (lambda x: jnp.where(x > 1, x, 0.0), lambda x: np.where(x > 1, x, 0.0)),
    "nested_jit": (lambda x: plax.jit(lambda y: y * 2)(x) + 1, lambda x: 2 * x + 1),
    "column": (lambda x: x[:, 2], lambda x: x[:, 2]),
    "outer_sum": (lambda x: x[None] + x[:, None], lambda x: x[None] + x[:, None]),
    "traced_row": (lambda x: x[jnp.sum(x[:, 0] > 0.5).astype(jnp.int32)],
                   lambda x: x[min(int(np.sum(x[:, 0] > 0.5)), len(x) - 1)]),
    "traced_negative_row": (lambda x: x[jnp.sum(x[:, 0] > 0.5).astype(jnp.int32) - 2],
                            lambda x: x[max(int(np.sum(x[:, 0] > 0.5)) - 2 + len(x), 0)
                                        if int(np.sum(x[:, 0] > 0.5)) < 2 else
                                        int(np.sum(x[:, 0] > 0.5)) - 2]),
    "last_row": (lambda x: plax.lax.dynamic_index_in_dim(x, -1, keepdims=False),
                 lambda x: x[-1]),
    # windowed reductions with a symbolic dimension (max, its jvp and its gradient)
    "window_max": (lambda x: _pair_max(x), lambda x: np.maximum(x[:, :-1], x[:, 1:])),
    "window_sum_over_batch": (
        lambda x: plax.lax.reduce_window(x, 0., plax.lax.add, (2, 1), (1, 1), "VALID"),
        lambda x: x[:-1] + x[1:]),
    "window_max_jvp": (lambda x: plax.jvp(_pair_max, (x,), (2 * x,))[1],
                       lambda x: 2 * np.maximum(x[:, :-1], x[:, 1:])),
    "window_max_grad": (plax.grad(lambda x: _pair_max(x).sum()), _ref_pair_max_grad),
    # vmap of dynamic_slice over rows and starts: a gather with a batching dimension pair
    "vmap_dynamic_slice": (lambda x: plax.vmap(_row_window(2))(x, _row_starts(x)),
                           lambda x: np.stack([r[s:s + 2] for r, s in zip(x, _np_starts(x))])),
    "vmap_dynamic_slice_empty": (lambda x: plax.vmap(_row_window(0))(x, _row_starts(x)),
                                 lambda x: np.zeros((len(x), 0), x.dtype)),
    # conj_p bound without input_dtype, with other parameters (as JAX's unop rules allow)
    "conj_bind": (lambda x: plax.lax.conj_p.bind(x, _input_dtype=np.float32),
                  lambda x: x.astype(np.complex64)),
    "argmax_features": (lambda x: jnp.argmax(x, axis=1), lambda x: np.argmax(x, axis=1)),
    "argmin_batch": (lambda x: plax.lax.argmin(x, 0, np.int16), lambda x: np.argmin(x, 0)),
    "bessel_i0e": (plax.lax.bessel_i0e, scipy.special.i0e),  # a loop's closed_call inside
    # a LAPACK custom call with symbolic result sizes (given as shape operands)
    "cholesky": (lambda x: jnp.linalg.cholesky(_spd(x)), lambda x: np.linalg.cholesky(_spd(x))),
    "svd_p_without_algorithm": (  # as JAX's, svd_p's algorithm parameter defaults to None
        lambda x: plax.lax.linalg.svd_p.bind(x.reshape(-1, 2, 2), full_matrices=False,
                                             compute_uv=False, subset_by_index=None)[0],
        lambda x: np.linalg.svd(x.reshape(-1, 2, 2), compute_uv=False)),
    "dynamic_slice_clamped": (lambda x: plax.lax.dynamic_slice(x, (0, 3), (x.shape[0], 2)),
                              lambda x: x[:, 2:]),
    "jit_in_loop": (lambda x: plax.lax.fori_loop(0, 2, lambda i, c: plax.jit(_double)(c), x),
                    lambda x: 4 * x),
    "empty_fft": (lambda x: jnp.fft.fft(jnp.zeros((x.shape[0], 0, 3), np.complex64)),
                  lambda x: np.zeros((len(x), 0, 3), np.complex64)),
    "vmap_gather": (lambda x: plax.vmap(lambda r, i: r[i])(x, jnp.argmax(x, axis=1)),
                    lambda x: x.max(1)),
}


def _spd(x):
    a = x.reshape(-1, 2, 2)
    return a @ a.swapaxes(-1, -2) + 2 * np.eye(2, dtype=np.float32)


def _double(y):
    return y * 2


def test_polymorphic_gamma_samples_keys_in_a_loop():
    """random.gamma: jitted samplers in a while loop, squeezed key arrays."""
    def f(a):
        return plax.vmap(lambda ai: plax.random.gamma(plax.random.key(42), ai))(a)
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct((B,), np.float32))
    a = np.array([0.5, 1.0, 3.0], np.float32)
    np.testing.assert_allclose(exp.call(a), plax.jit(f)(a), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_polymorphic_batch(name):
    f, ref = CASES[name]
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct((B, 4), np.float32))
    for n in (1, 2, 5):
        x = np.random.RandomState(n).uniform(-1, 2, (n, 4)).astype(np.float32)
        np.testing.assert_allclose(exp.call(x), ref(x), rtol=1e-5, atol=1e-5)


def test_module_is_polymorphic_and_refined_per_call():
    exp = export.export(plax.jit(lambda x: x @ W))(plax.ShapeDtypeStruct((B, 4), np.float32))
    assert [str(a) for a in exp.in_avals] == ["float32[b,4]"]
    assert [str(a) for a in exp.out_avals] == ["float32[b,3]"]
    text = exp.mlir_module()
    assert "jax.uses_shape_polymorphism = true" in text and "tensor<?x4xf32>" in text
    assert "stablehlo.get_dimension_size" in text


def _model(x):
    h = jnp.tanh(x @ W)
    return (h - jnp.mean(h, axis=0)) * jnp.shape(x)[0]


def _model_ref(x):
    h = np.tanh(x @ W)
    return (h - h.mean(0)) * x.shape[0]


def test_round_trip_jit_vmap_grad_with_a_polymorphic_batch():
    specs = export.symbolic_args_specs(np.ones((2, 4), np.float32), "b, ...")
    back = export.deserialize(export.export(plax.jit(_model))(specs).serialize(vjp_order=1))
    assert [str(a) for a in back.in_avals] == ["float32[b,4]"]
    called, jitted = back.call, plax.jit(back.call)
    grad_exported = plax.grad(lambda x: back.call(x).sum())
    for n in (1, 3):
        x = np.random.RandomState(n).randn(n, 4).astype(np.float32)
        np.testing.assert_allclose(called(x), _model_ref(x), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(jitted(x), _model_ref(x), rtol=1e-5, atol=1e-5)
        # d/dx sum((tanh(xW) - mean) * n) = 0: the centred rows sum to zero
        np.testing.assert_allclose(grad_exported(x), np.zeros_like(x), atol=1e-5)
    grad_weighted = plax.grad(lambda x: (back.call(x) * x[:, :3]).sum())
    x = np.random.RandomState(7).randn(2, 4).astype(np.float32)
    np.testing.assert_allclose(grad_weighted(x),
                               plax.grad(lambda x: (_model(x) * x[:, :3]).sum())(x),
                               rtol=1e-4, atol=1e-5)
    xs = np.random.RandomState(0).randn(2, 2, 4).astype(np.float32)
    np.testing.assert_allclose(plax.vmap(back.call)(xs), np.stack([_model_ref(x) for x in xs]),
                               rtol=1e-5, atol=1e-5)


def test_dimension_variable_in_an_expression():
    exp = export.export(plax.jit(lambda x: x.reshape(x.shape[0] // 2, 2)))(
        plax.ShapeDtypeStruct((2 * B,), np.float32))
    assert str(exp.out_avals[0]) == "float32[b,2]"
    np.testing.assert_array_equal(exp.call(np.arange(6, dtype=np.float32)),
                                  np.arange(6).reshape(3, 2))
    with pytest.raises(ValueError, match=r"Division had remainder 1 when computing the value "
                                         r"of 'b'"):
        exp.call(np.arange(5, dtype=np.float32))


@pytest.mark.parametrize("args, match", [
    ((np.ones((3, 5), np.float32), np.ones(3, np.float32)),
     r"Shape mismatch for args\[0\]\.shape\[1\] \(expected same constant\)"),
    ((np.ones((3, 4), np.float32), np.ones(4, np.float32)),
     r"Found inconsistency between dimension size args\[1\]\.shape\[0\] \(= 4\) and the "
     r"specification 'b' \(= 3\)"),
])
def test_call_checks_the_dimension_variables(args, match):
    exp = export.export(plax.jit(lambda x, y: x.sum(1) + y))(
        *export.symbolic_args_specs((np.ones((2, 4)), np.ones(2)), "b, ..."))
    with pytest.raises(ValueError, match=match):
        exp.call(*args)


_SOLVED_A = "'a' = 2 from specification 'a' for dimension args[0].shape[1] (= 2), "


@pytest.mark.parametrize("spec, shape, message", [
    ("a + 2*b, a, a + b + c", (8, 2, 9), None),  # a = 2, b = 3, c = 4
    ("a + 2*b, a, a + b + c", (2, 2, 6),
     "Expected value >= 1 for dimension variable 'b'. Using the following polymorphic "
     "shapes specifications: args[0].shape = (2*b + a, a, c + b + a). Obtained dimension "
     "variables: " + _SOLVED_A + "'b' = 0 from specification '2*b + a' for dimension "
     "args[0].shape[0] (= 2), . Please see"),
    ("a + 2*b, a, a + b + c", (3, 2, 6),
     "Division had remainder 1 when computing the value of 'b'. Using the following "
     "polymorphic shapes specifications: args[0].shape = (2*b + a, a, c + b + a). Obtained "
     "dimension variables: " + _SOLVED_A + ". "),
    ("a + 2*b, a, a + b", (8, 2, 6),
     "Found inconsistency between dimension size args[0].shape[0] (= 8) and the "
     "specification '2*b + a' (= 10)."),
    ("b, a + 1", (4, 1), "Expected value >= 1 for dimension variable 'a'"),
])
def test_dimension_variables_are_solved_from_linear_equations_in_rounds(spec, shape, message):
    exp = export.export(plax.jit(lambda x: x * 2))(
        plax.ShapeDtypeStruct(export.symbolic_shape(spec), np.float32))
    x = np.ones(shape, np.float32)
    if message is None:
        np.testing.assert_array_equal(exp.call(x), x * 2)
    else:
        with pytest.raises(ValueError, match="^Input shapes do not match the polymorphic "
                                             "shapes specification. " + re.escape(message)):
            exp.call(x)
    # the same checks are in the module, as shape assertions
    assert "shape_assertion" in exp.mlir_module()


def test_a_variable_that_no_linear_equation_gives_is_refused_at_export():
    with pytest.raises(ValueError, match=re.escape(
            "Cannot solve for values of dimension variables {'c'}. We can only solve linear "
            "uni-variate constraints.") + r".*Unprocessed specifications: 'c\^2' for "
            r"dimension size args\[0\]\.shape\[2\]"):
        export.export(plax.jit(lambda x: x))(
            plax.ShapeDtypeStruct(export.symbolic_shape("2*a + b, a, c*c"), np.float32))


def test_constraints_of_the_scope_are_checked_at_call():
    b, = export.symbolic_shape("b", constraints=["b >= 4"])
    exp = export.export(plax.jit(lambda x: x + 1))(plax.ShapeDtypeStruct((b,), np.float32))
    np.testing.assert_array_equal(exp.call(np.zeros(5, np.float32)), np.ones(5))
    with pytest.raises(ValueError, match=re.escape(
            "Input shapes do not match the symbolic shape constraint b >= 4. Expected 'b - 4' "
            "to be greater or equal to 0, but found -2.")):
        exp.call(np.zeros(2, np.float32))


def test_called_inside_another_export_the_checks_use_its_dimensions():
    inner = export.export(plax.jit(lambda x: x * 2))(
        plax.ShapeDtypeStruct(export.symbolic_shape("3, 4, 5*a"), np.float32))

    def outer(spec):
        return export.export(plax.jit(inner.call))(
            plax.ShapeDtypeStruct(export.symbolic_shape(spec), np.float32))
    with pytest.raises(ValueError, match=re.escape("Division had remainder mod(c, 5) when "
                                                   "computing the value of 'a'")):
        outer("3, 4, c")
    exp = outer("3, 4, 25*c")
    x = np.ones((3, 4, 25), np.float32)
    np.testing.assert_array_equal(exp.call(x), 2 * x)
    with pytest.raises(ValueError, match="Division had remainder 12 when computing the value "
                                         "of 'c'"):
        exp.call(np.ones((3, 4, 12), np.float32))


def test_unsupported_uses_of_a_symbolic_dimension_raise_clearly():
    spec = plax.ShapeDtypeStruct((B, 4), np.float32)
    with pytest.raises(InconclusiveDimensionOperation, match="'b' > '2' is inconclusive"):
        export.export(plax.jit(lambda x: x if x.shape[0] > 2 else -x))(spec)
    with pytest.raises(InconclusiveDimensionOperation,
                       match=r"operation 'cumsum' \(f32\[b,4\]\) -> \(f32\[b,4\]\) cannot be "
                             "lowered with symbolic dimensions"):
        export.export(plax.jit(lambda x: jnp.cumsum(x, axis=0)))(spec)
    with pytest.raises(InconclusiveDimensionOperation,
                       match=r"'b' < '2' is inconclusive. \(in the shape rule of "
                             r"'dynamic_slice' on \(f32\[b,4\], i32\[\], i32\[\]\)\)"):
        export.export(plax.jit(lambda x: plax.lax.dynamic_slice_in_dim(x, 1, 2)))(spec)


def test_polymorphic_exported_called_inside_another_polymorphic_export():
    inner = export.export(plax.jit(lambda x: jnp.sum(x, 1)))(
        plax.ShapeDtypeStruct((B, 3), np.float32))
    c, = export.symbolic_shape("c")
    outer = export.export(plax.jit(lambda x: inner.call(x[:, :3]) * 2))(
        plax.ShapeDtypeStruct((c, 5), np.float32))
    assert str(outer.out_avals[0]) == "float32[c]"
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    np.testing.assert_allclose(outer.call(x), 2 * x[:, :3].sum(1))


def test_the_vjp_of_a_polymorphic_export_with_an_integer_argument():
    def f(xi, xf):
        return 2 * xi.T, xf.T * xf.T
    specs = export.symbolic_args_specs([np.ones((2, 3), np.int32), np.ones((3, 4), np.float32)],
                                       shapes_specs=["2, a", "a, 4"])
    exp = export.deserialize(export.export(plax.jit(f))(*specs).serialize(vjp_order=1))
    xi = np.arange(6, dtype=np.int32).reshape(2, 3)
    xf = np.arange(12, dtype=np.float32).reshape(3, 4)
    (oi, of), pullback = plax.vjp(exp.call, xi, xf)
    ct_i, ct_f = pullback((np.zeros(oi.shape, plax.dtypes.float0), np.ones_like(of)))
    assert ct_i.dtype == plax.dtypes.float0 and ct_i.shape == (2, 3)
    np.testing.assert_allclose(ct_f, 2 * xf)


def test_dimensions_of_different_scopes_are_refused_at_export():
    x = plax.ShapeDtypeStruct(export.symbolic_shape("w, h1"), np.float32)
    y = plax.ShapeDtypeStruct(export.symbolic_shape("w, h2"), np.float32)
    with pytest.raises(ValueError, match=r"Invalid mixing of symbolic scopes when exporting "
                                         r"<lambda>.*from args\[0\].*for 'w' \(args\[1\]\)"):
        export.export(plax.jit(lambda x, y: x + y))(x, y)


def test_rng_bit_generator_with_a_symbolic_batch_of_keys():
    """vmap over b keys draws (b, 5, 7) bits from the first key: XLA's dynamic generator."""
    f = plax.vmap(lambda k: plax.lax.rng_bit_generator(k, (5, 7), dtype=np.uint32))
    exp = export.export(plax.jit(f))(plax.ShapeDtypeStruct((B, 4), np.uint32))
    assert "dynamic_rng_bit_generator" in exp.mlir_module()
    for n in (1, 3):
        keys = np.arange(4 * n, dtype=np.uint32).reshape(n, 4)
        new_keys, bits = exp.call(keys)
        want_keys, want_bits = plax.jit(f)(keys)
        assert bits.shape == (n, 5, 7)
        np.testing.assert_array_equal(bits, want_bits)
        np.testing.assert_array_equal(new_keys, want_keys)


def test_key_slices_take_the_symbolic_rule_whichever_module_loaded_first():
    """Slicing an array of keys lowers on its words with the slice rule in force when it is
    lowered (plax.export's symbolic one), not the one there when key_layout was imported."""
    import subprocess
    import sys
    code = ("import plax.first_order.key_layout\n"  # loaded before plax.export
            "import numpy as np, plax\nfrom plax import export\n"
            "r = plax.random\n"
            "f = lambda d: r.key_data(r.wrap_key_data(d)[:, :1])\n"
            "b, = export.symbolic_shape('b')\n"
            "spec = plax.ShapeDtypeStruct((b, 2, 2), np.uint32)\n"
            "exp = export.export(plax.jit(f))(spec)\n"
            "d = r.key_data(r.split(r.key(1), 6)).reshape(3, 2, 2)\n"
            "same = exp.call(d) == d[:, :1]\n"
            "print(same.shape, bool(same.all()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.stdout.strip().splitlines()[-1:] == ["(3, 1, 2) True"], out.stderr[-2000:]
