"""A library's own effects: ordered ones reach an MLIR-bindings lowering rule as
``ctx.tokens_in`` (a TokenSet) and leave by ``ctx.set_tokens_out``; the registries of
``jax._src.effects`` decide where an effect type a library defines may go (lowering,
cond/while/scan, custom derivatives, checkpoint's partial evaluation)."""
import re

import pytest

import plax
from plax._src import dispatch, effects
from plax.extend import core as xcore
from plax.interpreters import ad, mlir


class _Logged(effects.Effect):
    """Ordered, lowerable, allowed in control flow."""


class _Unlowerable(effects.Effect):
    """Registered nowhere."""


class _Rematted(effects.Effect):
    """Lowerable and allowed under checkpoint's partial evaluation."""


effects.lowerable_effects.add_type(_Logged)
effects.lowerable_effects.add_type(_Rematted)
effects.ordered_effects.add_type(_Logged)
effects.control_flow_allowed_effects.add_type(_Logged)
effects.remat_allowed_effects.add_type(_Rematted)

_logged, _logged2 = _Logged("logged"), _Logged("logged2")

# log_p(x, effect=e) calls the host function ``sink(x)`` in order, returning nothing.
log_p = xcore.Primitive("log_effect_test")
log_p.multiple_results = True


@log_p.def_effectful_abstract_eval
def _(*avals, sink, effect):
    return [], {effect}


def _log_rule(ctx, *args, sink, effect):
    token = ctx.tokens_in.get(effect)
    outs, token, keep = mlir.emit_python_callback(
        ctx, lambda *xs: (sink(*xs), ())[1], token, list(args), ctx.avals_in, ctx.avals_out,
        has_side_effect=True)
    ctx.module_context.add_keepalive(keep)
    ctx.set_tokens_out(ctx.tokens_in.update_tokens(mlir.TokenSet({effect: token})))
    return outs


mlir.register_lowering(log_p, _log_rule)

# mark_p(*xs, effect=e) returns its inputs and has effect e; its rule is set per test.
mark_p = xcore.Primitive("mark_effect_test")
mark_p.multiple_results = True


@mark_p.def_effectful_abstract_eval
def _(*avals, effect):
    return avals, {effect}


def _mark_jvp(primals, tangents, effect):
    return mark_p.bind(*primals, effect=effect), list(tangents)


def _mark_rule(ctx, *xs, effect):
    ctx.set_tokens_out(ctx.tokens_in)
    return list(xs)


ad.primitive_jvps[mark_p] = _mark_jvp
mlir.register_lowering(mark_p, _mark_rule)


@pytest.fixture
def mark_rule():
    """Register a lowering rule for mark_p for one test."""
    def register(rule, **kw):
        mlir.register_lowering(mark_p, rule, **kw)
    yield register
    mlir.register_lowering(mark_p, _mark_rule)


def test_token_set_is_an_ordered_map_of_effects_to_tokens():
    a, b, c = _Logged("a"), _Logged("b"), _Logged("c")
    ts = mlir.TokenSet({a: 1, b: 2, c: 3})
    assert len(ts) == 3 and len(mlir.TokenSet()) == 0
    assert ts.get(b) == 2 and ts.effects() == {a, b, c}
    with pytest.raises(KeyError, match="d"):
        ts.get(_Logged("d"))
    assert ts.subset([c, a]).items() == ((c, 3), (a, 1))
    assert ts.update_tokens(mlir.TokenSet()) is ts
    assert ts.update_tokens(mlir.TokenSet({b: 20})).items() == ((a, 1), (b, 20), (c, 3))
    with mlir.make_ir_context() as ctx, mlir.ir.Location.unknown(ctx):
        module = mlir.ir.Module.create()
        with mlir.ir.InsertionPoint(module.body):
            made = mlir.TokenSet.create([a, b])
            assert [str(t.type) for _, t in made.items()] == ["!stablehlo.token"] * 2


def test_ordered_callbacks_of_a_bindings_rule_run_in_program_order():
    seen = []

    @plax.jit
    def f(x):
        log_p.bind(x, sink=lambda v: seen.append(float(v)), effect=_logged)
        log_p.bind(x * 10, sink=lambda v: seen.append(float(v)), effect=_logged2)
        return x + 1

    assert float(f(2.0)) == 3.0
    first = dispatch.runtime_tokens.current_tokens[_logged]
    assert float(f(3.0)) == 4.0
    plax.effects_barrier()
    assert seen == [2.0, 20.0, 3.0, 30.0]
    assert dispatch.runtime_tokens.current_tokens[_logged] is not first
    text = f.lower(1.0).as_text()
    assert re.search(r"func\.func public @main\(%arg_token: !stablehlo\.token", text)


def test_rules_see_tokens_of_ordered_effects_only(mark_rule):
    seen = []

    def rule(ctx, *xs, effect):
        seen.append(sorted(map(repr, ctx.tokens_in.effects())))
        ctx.set_tokens_out(ctx.tokens_in)
        return list(xs)
    mark_rule(rule)

    class Unordered(effects.Effect):
        pass
    effects.lowerable_effects.add_type(Unordered)
    f = plax.jit(lambda x: mark_p.bind(mark_p.bind(x, effect=_logged)[0],
                                       effect=Unordered())[0] * 2)
    assert float(f(4.0)) == 8.0
    assert seen == [["logged"], []]


def test_a_rule_must_give_back_the_tokens_it_took(mark_rule):
    f = plax.jit(lambda x: mark_p.bind(x, effect=_logged)[0])
    mark_rule(lambda ctx, *xs, effect: list(xs))
    with pytest.raises(ValueError, match="needs to set `tokens_out`"):
        f.lower(1.0)
    mark_rule(lambda ctx, *xs, effect: (ctx.set_tokens_out(mlir.TokenSet()), list(xs))[1])
    with pytest.raises(ValueError, match="returns incorrect set of output tokens"):
        f.lower(2.0)


def test_a_rule_not_inlined_is_a_function_named_after_the_primitive(mark_rule):
    mark_rule(_mark_rule, inline=False)
    lowered = plax.jit(lambda x: mark_p.bind(x, effect=_logged)[0] + 1).lower(1.0)
    module = lowered.compiler_ir()
    main, fn = module.body.operations[0], module.body.operations[1]
    assert main.name.value == "main" and fn.name.value == "mark_effect_test"
    assert [str(t) for t in fn.type.inputs] == ["!stablehlo.token", "tensor<f32>"]
    assert float(lowered.compile()(1.0)) == 2.0


def test_effects_not_declared_lowerable_are_refused():
    f = plax.jit(lambda x: mark_p.bind(x, effect=_Unlowerable())[0])
    with pytest.raises(ValueError, match="Cannot lower jaxpr with effects"):
        f(1.0)


@pytest.mark.parametrize("where, run", [
    ("cond", lambda body: plax.lax.cond(True, body, lambda x: x, 1.0)),
    ("while", lambda body: plax.lax.while_loop(lambda x: x < 3, body, 1.0)),
    ("scan", lambda body: plax.lax.scan(lambda c, _: (body(c), None), 1.0, None, length=3)[0]),
])
def test_control_flow_takes_only_effects_declared_allowed(where, run):
    def bad(x):
        return mark_p.bind(x, effect=_Unlowerable())[0] + 1

    with pytest.raises(NotImplementedError, match=f"Effects not supported in `{where}`"):
        plax.make_jaxpr(lambda: run(bad))()
    seen = []

    def good(x):
        log_p.bind(x, sink=lambda v: seen.append(float(v)), effect=_logged)
        return x + 1
    assert float(plax.jit(lambda: run(good))()) in (2.0, 3.0, 4.0)
    plax.effects_barrier()
    assert seen and seen[0] == 1.0


def test_custom_derivatives_and_checkpoint_take_declared_effects_only():
    @plax.custom_jvp
    def f(x):
        return mark_p.bind(x, effect=_logged)[0]
    f.defjvp(lambda p, t: (p[0], t[0]))
    with pytest.raises(NotImplementedError, match="Effects not supported in `custom_jvp`"):
        plax.make_jaxpr(f)(1.0)

    refused = plax.checkpoint(lambda x: mark_p.bind(x, effect=_logged)[0] * 2)
    plax.make_jaxpr(refused)(1.0)  # staging is fine; partial evaluation is not
    with pytest.raises(NotImplementedError, match="partial-eval of `checkpoint`"):
        plax.linearize(refused, 1.0)

    rematted = _Rematted()
    allowed = plax.checkpoint(lambda x: mark_p.bind(x, effect=rematted)[0] * 2)
    assert plax.make_jaxpr(allowed)(1.0).effects == {rematted}
    assert float(plax.grad(allowed)(3.0)) == 2.0
