"""The key-reuse checker (jax_debug_key_reuse): a typed key may be consumed once, eagerly and
in traced code (jit, make_jaxpr, eval_shape, loops, cond); legacy keys and the flag left off
are never checked."""
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax, random

EAGER = "Previously-consumed key passed to jit-compiled function at index 0"
# normal, uniform, ... are jitted functions: their call consumes the key, as in JAX.
BITS = "In jit, argument 0 is already consumed"
# Indexing an array of keys with static indices consumes the elements taken.
SLICE = "In slice, argument 0 is already consumed"
SPLIT = "In random_split, argument 0 is already consumed"
LOOP = "body function leads to key reuse when repeatedly executed"


@pytest.fixture(autouse=True)
def reuse_checked():
    plax.config.update("jax_debug_key_reuse", True)
    try:
        yield
    finally:
        plax.config.update("jax_debug_key_reuse", False)


def here() -> int:
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


def consumed_here(line: int) -> str:
    return rf"{EAGER}: it was consumed at .*test_key_reuse\.py:{line} "


def twice(k):
    return random.normal(k) + random.normal(k)


# --- the error type -------------------------------------------------------------------------
def test_key_reuse_error_is_a_type_error():
    assert issubclass(plax.errors.KeyReuseError, TypeError)
    with pytest.raises(TypeError, match=BITS):
        plax.jit(twice)(random.key(0))


# --- eager ----------------------------------------------------------------------------------
def test_eager_normal_twice_names_where_first_consumed():
    k = random.key(0)
    first = random.normal(k); line = here()  # noqa: E702
    assert np.isfinite(float(first))
    with pytest.raises(plax.errors.KeyReuseError, match=consumed_here(line)):
        random.normal(k)


def test_eager_error_gives_advice():
    k = random.key(0)
    random.normal(k)
    with pytest.raises(plax.errors.KeyReuseError, match=re.escape("jax.random.split")):
        random.normal(k)


def test_eager_split_twice():
    k = random.key(0)
    random.split(k); line = here()  # noqa: E702
    with pytest.raises(plax.errors.KeyReuseError, match=consumed_here(line)):
        random.split(k)


def test_eager_uniform_then_bits():
    k = random.key(0)
    random.uniform(k); line = here()  # noqa: E702
    with pytest.raises(plax.errors.KeyReuseError, match=consumed_here(line)):
        random.bits(k)


def test_eager_normal_then_split():
    k = random.key(0)
    random.normal(k); line = here()  # noqa: E702
    with pytest.raises(plax.errors.KeyReuseError, match=consumed_here(line)):
        random.split(k)


def test_eager_vmap_drawing_twice_per_key():
    ks = random.split(random.key(0), 3)
    line = here() + 1
    f = plax.vmap(lambda k: random.normal(k) + random.normal(k))
    with pytest.raises(plax.errors.KeyReuseError, match=consumed_here(line)):
        f(ks)


def test_eager_vmap_once_then_again_fails():
    ks = random.split(random.key(0), 3)
    out = plax.vmap(random.normal)(ks); line = here()  # noqa: E702
    assert out.shape == (3,)
    with pytest.raises(plax.errors.KeyReuseError, match=consumed_here(line)):
        plax.vmap(random.normal)(ks)


def test_eager_grad_drawing_twice():
    k = random.key(0)
    line = here() + 1
    f = plax.grad(lambda x: x * random.normal(k) + random.normal(k))
    with pytest.raises(plax.errors.KeyReuseError, match=consumed_here(line)):
        f(1.0)


def test_eager_grad_once_then_draw_fails():
    k = random.key(0)
    g = plax.grad(lambda x: x * random.normal(k))(1.0); line = here()  # noqa: E702
    assert float(g) == pytest.approx(float(random.normal(random.key(0))))
    with pytest.raises(plax.errors.KeyReuseError, match=consumed_here(line)):
        random.normal(k)


def test_eager_key_data_clone_fold_in_of_consumed_key_are_fine():
    k = random.key(0)
    random.normal(k)
    assert random.key_data(k).shape == (2,)
    assert np.array_equal(random.key_data(random.clone(k)), random.key_data(k))
    assert random.key_data(random.fold_in(k, 3)).shape == (2,)


def test_eager_fold_in_does_not_consume():
    k = random.key(0)
    a = random.fold_in(k, 1)
    b = random.fold_in(k, 2)
    assert not np.array_equal(random.key_data(a), random.key_data(b))
    x = random.normal(k)  # k itself is still fresh
    assert float(x) == pytest.approx(float(random.normal(random.key(0))))
    # keys folded from k are fresh keys of their own
    assert np.isfinite(float(random.normal(a))) and np.isfinite(float(random.normal(b)))


def test_eager_clone_gives_a_fresh_key():
    k = random.key(0)
    c = random.clone(k)
    x = random.normal(k)
    y = random.normal(c)  # same bits, but not a reuse
    assert float(x) == float(y)
    c2 = random.clone(k)  # clone of a consumed key is fresh too
    assert float(random.normal(c2)) == float(x)


def test_eager_consumed_key_to_non_consuming_jit_is_fine():
    k = random.key(0)
    random.normal(k)
    data = plax.jit(lambda k: random.key_data(k))(k)
    assert np.array_equal(data, random.key_data(random.key(0)))
    out = plax.jit(lambda k: random.key_data(random.fold_in(k, 3)))(k)
    assert np.array_equal(out, random.key_data(random.fold_in(random.key(0), 3)))


def test_eager_jit_passing_a_consumed_key_through_keeps_it_consumed():
    k = random.key(0)
    random.normal(k); line = here()  # noqa: E702
    same = plax.jit(lambda k: k)(k)
    with pytest.raises(plax.errors.KeyReuseError, match=consumed_here(line)):
        random.normal(same)


def test_eager_user_jit_called_twice_on_one_key():
    f = plax.jit(lambda k: random.uniform(k, (2,)))
    k = random.key(0)
    f(k); line = here()  # noqa: E702
    with pytest.raises(plax.errors.KeyReuseError, match=consumed_here(line)):
        f(k)


def test_eager_split_keys_are_each_fresh():
    k1, k2 = random.split(random.key(0))
    x, y = random.normal(k1), random.normal(k2)
    assert float(x) != float(y)


def test_eager_wrap_key_data_twice_gives_fresh_keys():
    d = random.key_data(random.key(0))
    x = random.normal(random.wrap_key_data(d))
    y = random.normal(random.wrap_key_data(d))
    assert float(x) == float(y)


def test_legacy_keys_are_never_checked():
    k = random.PRNGKey(0)
    a, b = random.normal(k), random.normal(k)
    assert float(a) == float(b)
    s1, s2 = random.split(k), random.split(k)
    assert np.array_equal(s1, s2)
    assert float(plax.jit(twice)(k)) == pytest.approx(2 * float(a))


# --- traced: errors at trace time -------------------------------------------------------------
@pytest.mark.parametrize("stage", ["jit", "make_jaxpr", "eval_shape"])
def test_traced_drawing_twice(stage):
    k = random.key(0)
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        if stage == "jit":
            plax.jit(twice)(k)
        elif stage == "make_jaxpr":
            plax.make_jaxpr(twice)(k)
        else:
            plax.eval_shape(twice, k)


def test_traced_error_is_raised_before_running_and_key_stays_fresh():
    k = random.key(0)
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        plax.jit(twice)(k)
    assert float(random.normal(k)) == pytest.approx(float(random.normal(random.key(0))))


def test_traced_check_applies_to_a_jit_compiled_with_the_flag_off():
    f = plax.jit(lambda k: random.normal(k) + random.uniform(k))
    plax.config.update("jax_debug_key_reuse", False)
    assert np.isfinite(float(f(random.key(0))))
    plax.config.update("jax_debug_key_reuse", True)
    for _ in range(2):  # every call is refused, not only the first
        with pytest.raises(plax.errors.KeyReuseError, match=BITS):
            f(random.key(0))


def test_traced_static_indices_are_different_keys():
    ks = random.split(random.key(0), 3)
    out = plax.jit(lambda ks: jnp.stack([random.normal(ks[0]), random.normal(ks[1]),
                                         random.normal(ks[2])]))(ks)
    want = [float(random.normal(k)) for k in random.split(random.key(0), 3)]
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_traced_same_static_index_twice():
    ks = random.split(random.key(0), 3)
    with pytest.raises(plax.errors.KeyReuseError, match=SLICE):
        plax.jit(lambda ks: random.normal(ks[0]) + random.normal(ks[0]))(ks)


def test_traced_slice_then_index_names_the_same_key():
    ks = random.split(random.key(0), 3)
    with pytest.raises(plax.errors.KeyReuseError, match=SLICE):
        plax.jit(lambda ks: random.normal(ks[2]) + random.normal(ks[1:][1]))(ks)
    fine = plax.jit(lambda ks: random.normal(ks[0]) + random.normal(ks[1:][0]))
    assert np.isfinite(float(fine(random.split(random.key(0), 3))))


def test_traced_vmap_consumes_all_then_index_fails():
    ks = random.split(random.key(0), 3)
    with pytest.raises(plax.errors.KeyReuseError, match=SLICE):
        plax.jit(lambda ks: plax.vmap(random.normal)(ks).sum() + random.normal(ks[0]))(ks)


def test_traced_reshape_view_is_the_same_key():
    k = random.key(0)
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        plax.jit(lambda k: random.normal(k) + random.normal(k.reshape(1, 1)[0, 0]))(k)


def test_traced_broadcast_view_is_the_same_key():
    k = random.key(0)
    with pytest.raises(plax.errors.KeyReuseError, match=SLICE):
        plax.jit(lambda k: random.normal(k) + random.normal(jnp.broadcast_to(k, (2,))[1]))(k)


def test_traced_transpose_consumes_keys():
    # As in JAX: transpose has no key-reuse signature, so it consumes its operand and its
    # result is born consumed.
    ks = random.split(random.key(0), (2, 2))
    with pytest.raises(plax.errors.KeyReuseError, match=SLICE):
        plax.jit(lambda ks: random.normal(ks.T[0, 1]))(ks)


def test_traced_concatenate_consumes_operands_and_gives_fresh_keys():
    cat = lambda a, b: jnp.concatenate([a[None], b[None]])  # noqa: E731
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        plax.jit(lambda a, b: random.normal(cat(a, b)[0]) + random.normal(a))(
            random.key(0), random.key(1))

    def fine(a, b):
        both = cat(a, b)
        return random.normal(both[0]) + random.normal(both[1])
    assert np.isfinite(float(plax.jit(fine)(random.key(0), random.key(1))))


def test_traced_split_then_reuse():
    k = random.key(0)
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        plax.jit(lambda k: (random.split(k), random.normal(k)))(k)


def test_traced_split_twice():
    k = random.key(0)
    with pytest.raises(plax.errors.KeyReuseError, match=SPLIT):
        plax.jit(lambda k: (random.split(k), random.split(k)))(k)


def test_traced_draw_then_split():
    k = random.key(0)
    with pytest.raises(plax.errors.KeyReuseError, match=SPLIT):
        plax.make_jaxpr(lambda k: (random.normal(k), random.split(k)))(k)


def test_traced_where_consumes_both_operands():
    # As in JAX: select_n has no key-reuse signature, so it consumes its key operands and its
    # result is born consumed.
    from plax.experimental.key_reuse._core import KeyReuseSignature, Sink, \
        function_type_signature
    pick = lambda c, a, b: jnp.where(c, a, b)  # noqa: E731
    assert function_type_signature(pick, True, random.key(0), random.key(1)) == \
        KeyReuseSignature(Sink(1), Sink(2))
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        plax.jit(lambda c, a, b: random.normal(pick(c, a, b)))(True, random.key(0),
                                                               random.key(1))


def test_traced_dynamic_index_consumes_the_array():
    # ks[i] is the whole array to the checker (as in JAX): drawing from it consumes all.
    ks = random.split(random.key(0), 3)
    out = plax.jit(lambda ks, i: random.normal(ks[i]))(ks, 1)
    want = random.normal(random.split(random.key(0), 3)[1])
    assert float(out) == pytest.approx(float(want))
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        plax.jit(lambda ks, i: (random.normal(ks[0]), random.normal(ks[i])))(
            random.split(random.key(0), 3), 1)
    with pytest.raises(plax.errors.KeyReuseError, match=SLICE):
        plax.jit(lambda ks, i: (random.normal(ks[i]), random.normal(ks[2])))(
            random.split(random.key(0), 3), 1)


def test_traced_fold_in_does_not_consume():
    f = plax.jit(lambda k: random.normal(random.fold_in(k, 1)) + random.normal(random.fold_in(k, 2))
                 + random.normal(k))
    assert np.isfinite(float(f(random.key(0))))


def test_traced_key_data_does_not_consume():
    f = plax.jit(lambda k: (random.key_data(k), random.normal(k)))
    data, x = f(random.key(0))
    assert np.array_equal(data, random.key_data(random.key(0)))
    assert float(x) == pytest.approx(float(random.normal(random.key(0))))


def test_traced_clone_then_draw_from_both():
    f = plax.jit(lambda k: (random.normal(random.clone(k)), random.normal(k)))
    x, y = f(random.key(0))
    assert float(x) == float(y)


def test_traced_wrap_key_data_twice_gives_fresh_keys():
    f = plax.jit(lambda d: (random.normal(random.wrap_key_data(d)),
                            random.normal(random.wrap_key_data(d))))
    x, y = f(random.key_data(random.key(0)))
    assert float(x) == float(y)


def test_traced_nested_jit():
    inner = plax.jit(lambda k: random.normal(k))
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        plax.jit(lambda k: inner(k) + plax.jit(lambda k: random.uniform(k))(k))(random.key(0))
    passthrough = plax.jit(lambda k: plax.jit(lambda k: k)(k))
    k = passthrough(random.key(0))
    assert float(random.normal(k)) == pytest.approx(float(random.normal(random.key(0))))


def test_traced_nested_jit_passthrough_then_draw_twice():
    ident = plax.jit(lambda k: k)
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        plax.jit(lambda k: random.normal(ident(k)) + random.normal(k))(random.key(0))


def test_traced_checkpoint_is_followed():
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        plax.jit(plax.checkpoint(twice))(random.key(0))


# --- loops ------------------------------------------------------------------------------------
def test_fori_loop_consuming_closed_over_key():
    f = lambda k: lax.fori_loop(0, 3, lambda i, x: x + random.normal(k), 0.0)  # noqa: E731
    with pytest.raises(plax.errors.KeyReuseError, match=LOOP):
        plax.jit(f)(random.key(0))


def test_while_loop_consuming_closed_over_key():
    def f(k):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + random.normal(k)),
                              (0, 0.0))
    with pytest.raises(plax.errors.KeyReuseError, match=rf"while_loop {LOOP}"):
        plax.jit(f)(random.key(0))


def test_scan_consuming_closed_over_key():
    def f(k):
        return lax.scan(lambda c, _: (c + random.normal(k), None), 0.0, None, length=3)
    with pytest.raises(plax.errors.KeyReuseError, match=rf"scan {LOOP}"):
        plax.make_jaxpr(f)(random.key(0))


def test_fori_loop_reusing_its_carried_key():
    def body(i, c):
        k, acc = c
        return k, acc + random.normal(k)
    with pytest.raises(plax.errors.KeyReuseError, match=LOOP):
        plax.jit(lambda k: lax.fori_loop(0, 3, body, (k, 0.0)))(random.key(0))


def split_body(c):
    k, acc = c
    k, sub = random.split(k)
    return k, acc + random.normal(sub)


def test_fori_loop_splitting_its_carried_key_is_fine():
    _, acc = plax.jit(lambda k: lax.fori_loop(0, 3, lambda i, c: split_body(c), (k, 0.0)))(
        random.key(0))
    want, k = 0.0, random.key(0)
    for _ in range(3):
        k, sub = random.split(k)
        want += float(random.normal(sub))
    assert float(acc) == pytest.approx(want, rel=1e-5)


def test_while_loop_splitting_its_carried_key_is_fine():
    _, acc = plax.jit(lambda k: lax.while_loop(lambda c: c[1] < 1e9, split_body, (k, 1e9)))(
        random.key(0))
    assert float(acc) == 1e9  # the body never ran; the check still traced it twice
    k_out, acc = plax.jit(lambda k: lax.while_loop(lambda c: jnp.abs(c[1]) < 1e-9, split_body,
                                                   (k, 0.0)))(random.key(0))
    assert float(acc) != 0.0
    assert np.isfinite(float(random.normal(k_out)))


def test_scan_splitting_its_carried_key_is_fine():
    def body(c, _):
        return split_body(c), None
    (_, acc), _ = plax.jit(lambda k: lax.scan(body, (k, 0.0), None, length=3))(random.key(0))
    assert np.isfinite(float(acc))


def test_scan_over_keys_drawing_once_per_step_is_fine():
    ks = random.split(random.key(0), 3)
    total, _ = plax.jit(lambda ks: lax.scan(lambda c, k: (c + random.normal(k), None), 0.0, ks))(ks)
    want = sum(float(random.normal(k)) for k in random.split(random.key(0), 3))
    assert float(total) == pytest.approx(want, rel=1e-5)


def test_scan_over_keys_drawing_twice_per_step():
    ks = random.split(random.key(0), 3)
    body = lambda c, k: (c + random.normal(k) + random.uniform(k), None)  # noqa: E731
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        plax.jit(lambda ks: lax.scan(body, 0.0, ks))(ks)


def test_scan_over_keys_consumes_them():
    ks = random.split(random.key(0), 3)
    body = lambda c, k: (c + random.normal(k), None)  # noqa: E731
    with pytest.raises(plax.errors.KeyReuseError, match=SLICE):
        plax.jit(lambda ks: (lax.scan(body, 0.0, ks), random.normal(ks[0])))(ks)


# --- cond -------------------------------------------------------------------------------------
def test_cond_each_branch_consuming_the_same_key_is_fine():
    f = plax.jit(lambda p, k: lax.cond(p, random.normal, random.uniform, k))
    assert float(f(True, random.key(0))) == pytest.approx(float(random.normal(random.key(0))))
    assert float(f(False, random.key(0))) == pytest.approx(float(random.uniform(random.key(0))))


def test_cond_then_consuming_again():
    def f(p, k):
        return lax.cond(p, random.normal, random.uniform, k), random.normal(k)
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        plax.jit(f)(True, random.key(0))


def test_cond_consumes_what_any_branch_consumes():
    def f(p, k):
        return lax.cond(p, random.normal, lambda k: jnp.float32(0.0), k), random.normal(k)
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        plax.make_jaxpr(f)(False, random.key(0))
    g = plax.jit(lambda p, k: (lax.cond(p, lambda k: jnp.float32(0.0),
                                        lambda k: jnp.float32(1.0), k), random.normal(k)))
    assert float(g(True, random.key(0))[0]) == 0.0


# --- the flag ---------------------------------------------------------------------------------
def test_flag_off_nothing_raises():
    plax.config.update("jax_debug_key_reuse", False)
    k = random.key(0)
    a, b = random.normal(k), random.normal(k)
    assert float(a) == float(b)
    assert float(plax.jit(twice)(k)) == pytest.approx(2 * float(a))
    ks = random.split(random.key(1), 3)
    plax.jit(lambda ks: random.normal(ks[0]) + random.normal(ks[0]))(ks)
    out = plax.jit(lambda k: lax.fori_loop(0, 3, lambda i, x: x + random.normal(k), 0.0))(k)
    assert float(out) == pytest.approx(3 * float(a), rel=1e-5)
    plax.make_jaxpr(lambda k: (random.split(k), random.normal(k)))(k)
    plax.vmap(lambda k: random.normal(k) + random.normal(k))(ks)


def test_context_manager_enables_and_does_not_leak():
    plax.config.update("jax_debug_key_reuse", False)
    k = random.key(0)
    with plax.debug_key_reuse(True):
        random.normal(k)
        with pytest.raises(plax.errors.KeyReuseError, match=EAGER):
            random.normal(k)
        with pytest.raises(plax.errors.KeyReuseError, match=BITS):
            plax.jit(twice)(random.key(1))
    assert float(plax.jit(twice)(random.key(1))) == pytest.approx(
        2 * float(random.normal(random.key(1))))
    random.normal(k)  # flag off again: the consumed key may be drawn from


def test_context_manager_can_disable_inside_enabled():
    with plax.debug_key_reuse(False):
        assert np.isfinite(float(plax.jit(twice)(random.key(0))))
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        plax.jit(twice)(random.key(0))


def test_context_manager_restores_after_an_error():
    plax.config.update("jax_debug_key_reuse", False)
    with pytest.raises(plax.errors.KeyReuseError, match=BITS):
        with plax.debug_key_reuse(True):
            plax.jit(twice)(random.key(0))
    assert np.isfinite(float(plax.jit(twice)(random.key(0))))


# --- regressions ----------------------------------------------------------------------------
def test_scan_with_key_inputs_and_ys_is_checked_without_crashing():
    ks = random.split(random.key(0), 3)
    _, ys = plax.jit(lambda ks: lax.scan(lambda c, k: (c, random.normal(k)), 0., ks))(ks)
    want = np.stack([np.asarray(random.normal(k)) for k in random.split(random.key(0), 3)])
    np.testing.assert_array_equal(np.asarray(ys), want)
    carry, ones = lax.scan(lambda k, _: (random.split(k)[0], 1.), random.key(1), None, length=3)
    np.testing.assert_array_equal(np.asarray(ones), [1., 1., 1.])


def test_traced_error_names_the_line_of_the_checked_function():
    plax.jit(lambda k: random.normal(k))(random.key(0))  # traces normal's body here first

    def f(k):
        a = random.normal(k); line[0] = here()  # noqa: E702
        return a + random.normal(k)
    line = [None]
    with pytest.raises(plax.errors.KeyReuseError,
                       match=rf"{BITS}: it was consumed at .*test_key_reuse\.py:(\d+):12 \(f\)"):
        plax.make_jaxpr(f)(random.key(1))
    with pytest.raises(plax.errors.KeyReuseError, match=r"test_key_reuse\.py:\d+:\d+ \(f\)"):
        plax.jit(f)(random.key(2))


def test_fold_in_does_not_consume_under_disable_jit():
    with plax.disable_jit():
        k = random.key(0)
        a, b = random.fold_in(k, 1), random.fold_in(k, 2)
    assert not np.array_equal(np.asarray(random.key_data(a)), np.asarray(random.key_data(b)))


def test_the_checker_loads_when_the_flag_is_first_on():
    # In a fresh process: import plax leaves the checker unloaded; turned on later (by the
    # context manager, then by config.update) it checks eager calls, here of a jaxpr holding
    # a jit traced with the flag off (pjit's eager rule, not a retrace, sees the keys).
    code = textwrap.dedent("""
        import json, sys
        import plax
        from plax import random
        loaded = "plax.interpreters.key_reuse" in sys.modules
        closed = plax.make_jaxpr(plax.jit(random.bits))(random.key(0))
        def twice():
            k = random.key(1)
            plax.core.eval_jaxpr(closed.jaxpr, closed.consts, k)
            try:
                plax.core.eval_jaxpr(closed.jaxpr, closed.consts, k)
            except plax.errors.KeyReuseError as e:
                return str(e).split(":")[0]
            return "not checked"
        off = twice()
        with plax.debug_key_reuse(True):
            context = twice()
        plax.config.update("jax_debug_key_reuse", True)
        print(json.dumps([loaded, off, context, twice()]))
        """)
    src = os.path.join(os.path.dirname(__file__), "..", "..", "src")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.path.abspath(src)), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == [False, "not checked", EAGER, EAGER]


# --- the signatures (jax.experimental.key_reuse._core) -----------------------------------------
def _signatures():
    from plax.experimental.key_reuse import _core
    return _core


@pytest.mark.parametrize("fun, args, expected", [
    (lambda k: random.bits(k), (random.key(0),), "KeyReuseSignature(Sink(0))"),
    (lambda k: random.split(k), (random.key(0),), "KeyReuseSignature(Sink(0), Source(0))"),
    (lambda k: random.fold_in(k, 3), (random.key(0),), "KeyReuseSignature(Source(0))"),
    (lambda k: k.reshape(1), (random.key(0),), "KeyReuseSignature(Forward(0, 0))"),
    (lambda ks: ks[1], (random.split(random.key(0), 3),),
     "KeyReuseSignature(Sink(0, [False  True False]), Source(0))"),
    (lambda a, b: (random.bits(b), a), (random.key(0), random.key(1)),
     "KeyReuseSignature(Sink(1), Forward(0, 1))"),
])
def test_function_signatures(fun, args, expected):
    assert repr(_signatures().function_type_signature(fun, *args)) == expected


def test_consume_and_assertions_are_checked_by_the_analysis():
    core = _signatures()

    def fine(k):
        core.assert_unconsumed(k)
        k2 = core.consume(k)
        core.assert_consumed(k)
        core.assert_consumed(k2)
    core.check_key_reuse(fine, random.key(0))
    with pytest.raises(AssertionError, match="Expected key to not be consumed"):
        core.check_key_reuse(lambda k: core.assert_unconsumed(core.consume(k)), random.key(0))
    with pytest.raises(plax.errors.KeyReuseError, match="In consume, argument 0 is already"):
        core.check_key_reuse(lambda k: core.consume(core.consume(k)), random.key(0))


def test_sink_and_source_are_immutable_and_compare_by_value():
    core = _signatures()
    mask = np.array([True, False])
    sink = core.Sink(0, mask)
    assert mask.flags.writeable and not sink.mask.flags.writeable
    with pytest.raises(ValueError, match="Sink is immutable"):
        sink.idx = 1
    assert core.Sink(0, np.array([True, True])) == core.Sink(0)
    assert hash(core.Sink(0, np.array([True, True]))) == hash(core.Sink(0))
    assert core.Sink(0, np.zeros(0, bool)) == core.Sink(0, False)
    assert core.Source(0) != core.Sink(0)
    assert core.KeyReuseSignature(core.Sink(1), core.Sink(0)) == \
        core.KeyReuseSignature(core.Sink(0), core.Sink(1))
