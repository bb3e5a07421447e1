"""The lowering context (platform, mesh, manual axes), platform-keyed rules, ``lower_fun``
and the locations of ops inside regions."""
import re

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core import rules
from plax.core.primitive import Primitive
from plax.lowering import ModuleContext, lower_fun
from plax.lowering.stablehlo import lower_jaxpr_to_module

X = np.array([0.5, -1.0, 2.0], np.float32)


@pytest.fixture
def make_prim():
    """Make test primitives (identity-typed unless told); every table forgets them after."""
    made = []

    def make(name, multiple_results=False, abstract=None):
        prim = Primitive(name, multiple_results=multiple_results)
        prim.def_abstract_eval(abstract or (lambda x, **_: x))
        made.append(prim)
        return prim

    yield make
    for prim in made:
        for table in (rules.lowering_rules, rules.platform_lowering_rules,
                      rules.abstract_eval_rules, rules.impl_rules):
            table.pop(prim, None)
        while prim in rules.all_primitives:
            rules.all_primitives.remove(prim)


def _negate(ctx, x):
    return ctx.op1("stablehlo.negate", [x])


def _exp(ctx, x):
    return ctx.op1("stablehlo.exponential", [x])


def _jaxpr(f, *args):
    return plax.make_jaxpr(f)(*args).jaxpr


# --- the context ---------------------------------------------------------------------------
def test_rules_see_the_module_context(make_prim):
    prim = make_prim("test_ctx_probe")
    seen = []

    def rule(ctx, x):
        seen.append((ctx.platform, ctx.mesh, ctx.manual_axes, ctx.module_context.platform,
                     ctx.module_context.module is ctx.fn.module,
                     isinstance(ctx.module_context, ModuleContext)))
        return x

    rules.register_lowering(prim, rule)
    jaxpr = _jaxpr(prim.bind, X)
    lower_jaxpr_to_module(jaxpr)                       # default: cpu, no mesh, no manual axes
    lower_jaxpr_to_module(jaxpr, platform="GPU", manual_axes={"i"})
    assert seen == [("cpu", None, frozenset(), "cpu", True, True),
                    ("cuda", None, frozenset({"i"}), "cuda", True, True)]

    seen.clear()
    np.testing.assert_array_equal(plax.jit(prim.bind)(X), X)   # compiled for the CPU device
    assert seen == [("cpu", None, frozenset(), "cpu", True, True)]


def test_module_context_replace_keeps_the_module():
    from plax.lowering.stablehlo import ModuleBuilder
    builder = ModuleBuilder("m", platform="cuda")
    ctx = builder.context
    manual = ctx.replace(manual_axes={"x"})
    assert (manual.module, manual.platform, manual.manual_axes) == (builder, "cuda", {"x"})
    assert ctx.manual_axes == frozenset()
    with pytest.raises(TypeError, match="no field.*'platfrom'"):
        ctx.replace(platfrom="cpu")


# --- platform-keyed rules ------------------------------------------------------------------
def test_cpu_rule_wins_over_the_default_on_cpu(make_prim):
    prim = make_prim("test_cpu_vs_default")
    rules.register_lowering(prim, _negate)
    rules.register_lowering(prim, _exp, platform="cpu")
    x = jnp.asarray(X)
    np.testing.assert_allclose(prim.bind(x), np.exp(X), rtol=1e-6)            # eager
    np.testing.assert_allclose(plax.jit(prim.bind)(x), np.exp(X), rtol=1e-6)  # jit
    text = plax.jit(prim.bind).lower(x).as_text()
    assert "stablehlo.exponential" in text and "stablehlo.negate" not in text
    # Other platforms fall back to the rule for every platform.
    cuda = lower_jaxpr_to_module(_jaxpr(prim.bind, X), platform="cuda")
    assert "stablehlo.negate" in cuda and "stablehlo.exponential" not in cuda


def test_primitive_with_only_a_cuda_rule_fails_clearly_on_cpu(make_prim):
    prim = make_prim("test_cuda_only")
    rules.register_lowering(prim, _exp, platform="cuda")
    msg = (r"MLIR translation rule for primitive 'test_cuda_only' not found for platform cpu "
           r"\(it has lowering rules for: cuda\)")
    with pytest.raises(NotImplementedError, match=msg):
        prim.bind(jnp.asarray(X))
    with pytest.raises(NotImplementedError, match=msg):
        plax.jit(prim.bind).lower(X)
    assert "stablehlo.exponential" in lower_jaxpr_to_module(_jaxpr(prim.bind, X), platform="cuda")


def test_primitive_without_any_rule_names_primitive_and_platform(make_prim):
    prim = make_prim("test_no_rule")
    with pytest.raises(NotImplementedError,
                       match=r"primitive 'test_no_rule' not found for platform cpu$"):
        plax.jit(prim.bind).lower(X)


# --- lower_fun -----------------------------------------------------------------------------
def test_lower_fun_computes_its_function_with_constants_and_params(make_prim):
    prim = make_prim("test_lower_fun_poly")
    table = np.array([10.0, 20.0, 30.0], np.float32)   # an array constant of the traced jaxpr
    calls = []

    def poly(x, *, scale):
        calls.append(x.aval.shape)
        return lax.add(lax.mul(lax.mul(x, x), np.float32(scale)), table)

    rules.register_lowering(prim, lower_fun(poly))
    x = jnp.asarray(X)
    want = X * X * 3.0 + table
    np.testing.assert_allclose(prim.bind(x, scale=3.0), want, rtol=1e-6)                      # eager
    np.testing.assert_allclose(plax.jit(lambda v: prim.bind(v, scale=3.0))(x), want, rtol=1e-6)  # jit
    np.testing.assert_allclose(plax.jit(lambda v: prim.bind(v, scale=-1.0))(x),
                               -X * X + table, rtol=1e-6)
    text = plax.jit(lambda v: prim.bind(v, scale=3.0)).lower(x).as_text()
    assert "stablehlo.multiply" in text and "stablehlo.add" in text
    assert 'dense<"0x' + table.astype("<f4").tobytes().hex().upper() + '"> : tensor<3xf32>' in text
    # Traced once per (operand types, params): the lowering above reused the first trace.
    assert calls == [(3,), (3,)]
    plax.jit(lambda v: prim.bind(v, scale=3.0)).lower(np.ones(3, np.float32)).as_text()
    assert calls == [(3,), (3,)]


def test_lower_fun_multiple_results_and_platform_rules_inside(make_prim):
    inner = make_prim("test_lower_fun_inner")
    rules.register_lowering(inner, _negate)
    rules.register_lowering(inner, _exp, platform="cpu")
    prim = make_prim("test_lower_fun_pair", multiple_results=True,
                     abstract=lambda x: [x, x])

    def pair(x):
        return [inner.bind(x), lax.mul(x, np.float32(2))]

    rules.register_lowering(prim, lower_fun(pair, multiple_results=True))
    for f in (prim.bind, plax.jit(prim.bind)):
        a, b = f(jnp.asarray(X))
        np.testing.assert_allclose(a, np.exp(X), rtol=1e-6)   # the inner cpu rule was used
        np.testing.assert_allclose(b, 2 * X, rtol=1e-6)
    cuda = lower_jaxpr_to_module(_jaxpr(prim.bind, X), platform="cuda")
    assert "stablehlo.negate" in cuda and "stablehlo.exponential" not in cuda


def test_lower_fun_ops_carry_the_equations_location(make_prim):
    prim = make_prim("test_lower_fun_loc")
    rules.register_lowering(prim, lower_fun(lambda x: lax.sin(lax.cos(x))))

    def f(x):
        with plax.named_scope("outer"):
            return prim.bind(x)

    text = plax.jit(f).lower(X).as_text(debug_info=True)
    for op in ("stablehlo.cosine", "stablehlo.sine"):
        line = next(l for l in text.splitlines() if op in l)
        assert re.search(r'loc\("outer/test_lower_fun_loc"\(".*test_lowering_context\.py":\d+:\d+\)\)',
                         line), line
    np.testing.assert_allclose(plax.jit(f)(X), np.sin(np.cos(X)), rtol=1e-6)


def test_gather_clip_and_fill_lowered_through_lower_fun():
    x = jnp.asarray(np.arange(5, dtype=np.float32))
    idx = np.array([[-2], [1], [7]], np.int32)
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
    clip = plax.jit(lambda v: lax.gather(v, idx, dn, (1,), mode="clip"))(x)
    np.testing.assert_array_equal(clip, [0.0, 1.0, 4.0])
    fill = plax.jit(lambda v: lax.gather(v, idx, dn, (1,), mode="fill", fill_value=-1.0))(x)
    np.testing.assert_array_equal(fill, [-1.0, 1.0, -1.0])


# --- regions -------------------------------------------------------------------------------
def _line_with(text, op):
    return next(l for l in text.splitlines() if op in l)


def test_ops_in_regions_carry_the_enclosing_scope():
    def combine(a, b):
        return lax.add(lax.mul(a, np.float32(0.5)), b)

    def inner(x):
        return lax.sort(x), lax.reduce(x, np.float32(0), combine, (0,))

    def outer(x):
        with plax.named_scope("A"):
            return plax.jit(inner)(x)

    text = plax.jit(outer).lower(X).as_text(debug_info=True)
    # The comparator of sort's region: ops the sort rule emits itself.
    assert re.search(r'loc\("A/jit\(inner\)/sort"\(".*test_lowering_context\.py":\d+:\d+\)\)',
                     _line_with(text, "stablehlo.compare")), text
    # The reduce computation's own equations, lowered inside reduce's region.
    assert 'loc("A/jit(inner)/mul"' in _line_with(text, "stablehlo.multiply"), text
    s, r = plax.jit(outer)(X)
    np.testing.assert_array_equal(s, np.sort(X))
    want = np.float32(0)
    for v in X:
        want = want * np.float32(0.5) + v
    np.testing.assert_allclose(r, want, rtol=1e-6)


def test_sort_region_under_a_named_scope_in_the_top_function():
    def f(x):
        with plax.named_scope("S"):
            return lax.sort(x)

    text = plax.jit(f).lower(X).as_text(debug_info=True)
    assert 'loc("S/sort"' in _line_with(text, "stablehlo.compare"), text
    # Every op line inside the sort carries a location.
    start = text.index('"stablehlo.sort"')
    region = text[start:text.index('"stablehlo.return"', start)]
    ops = [l for l in region.splitlines()[1:] if '"stablehlo.' in l]
    assert ops and all('loc("S/sort"' in l for l in ops), region
