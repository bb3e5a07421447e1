"""plax.extend.linear_util: WrappedFun, transformation stacks and their stores, cache."""
import pytest

from plax.api_util import debug_info
from plax.extend import linear_util as lu


def _dbg(f, args=(1,)):
    return debug_info("test", f, args, {})


def base(log, x, scale=1):
    log.append("f")
    return x * scale


@lu.transformation
def add_gen(amount, log, x):
    """Generator style: adds ``amount`` to the argument, doubles the result."""
    log.append(f"gen in {amount}")
    out = yield (log, x + amount), {}
    log.append(f"gen out {amount}")
    yield 2 * out


@lu.transformation2
def add_fn(f, amount, log, x):
    """Function style: the same as ``add_gen``."""
    log.append(f"fn in {amount}")
    out = f(log, x + amount)
    log.append(f"fn out {amount}")
    return 2 * out


def test_stack_runs_newest_transformation_first_on_arguments():
    wf = lu.wrap_init(base, debug_info=_dbg(base, ([], 1)))
    wf = add_gen(wf, 10)
    wf = add_fn(wf, 100)
    log = []
    # add_fn(100) sees the argument first, add_gen(10) second; results go the other way.
    assert wf.call_wrapped(log, 1) == 2 * (2 * (1 + 100 + 10))
    assert log == ["fn in 100", "gen in 10", "f", "gen out 10", "fn out 100"]
    assert [static for _, static in wf.transforms] == [(100,), (10,)]
    assert wf.stores == (None, None)
    assert wf.f is base and wf.__name__ == "base" and wf.in_type is None


def test_params_are_keyword_arguments_of_every_call():
    wf = lu.wrap_init(base, {"scale": 3}, debug_info=_dbg(base, ([], 1)))
    assert wf.params == (("scale", 3),)
    assert wf.call_wrapped([], 5) == 15


@lu.transformation_with_aux
def count_aux(x):
    out = yield (x,), {}
    yield out + 1, {"seen": x}


def test_aux_store_filled_by_the_call():
    wf, aux = count_aux(lu.wrap_init(lambda x: 2 * x, debug_info=_dbg(base)))
    with pytest.raises(lu.StoreException, match="Store empty"):
        aux()
    assert wf.call_wrapped(4) == 9
    assert aux() == {"seen": 4}
    with pytest.raises(lu.StoreException, match="Store occupied"):
        wf.call_wrapped(4)
    assert wf.stores[0] is not None and len(wf.stores) == 1


def test_aux2_function_style_and_equal_store():
    def tag(f, store, name, x):
        store.store(name)
        return f(x)
    neg = lambda x: -x  # noqa: E731
    wf = lu.wrap_init(neg, debug_info=_dbg(neg))
    plain, plain_aux = lu.transformation_with_aux2(tag)(wf, "a")
    assert plain.call_wrapped(3) == -3 and plain_aux() == "a"
    eq, eq_aux = lu.transformation_with_aux2(tag)(wf, "b", use_eq_store=True)
    assert eq.call_wrapped(1) == -1 and eq.call_wrapped(2) == -2  # the same aux twice: fine
    assert eq_aux() == "b"
    eq.stores[0].reset()
    eq.stores[0].store("b")
    with pytest.raises(lu.StoreException, match="not-equal"):
        eq.stores[0].store("c")
    unknown, _ = lu.transformation_with_aux2(tag)(wf, "c", unk_names=True)
    assert unknown.debug_info.arg_names is None and wf.debug_info.arg_names == ("x",)


def test_wrapped_functions_compare_by_what_they_compute():
    f = lambda x: x  # noqa: E731
    dbg = _dbg(f)
    a = add_fn(lu.wrap_init(f, debug_info=dbg), 1)
    b = add_fn(lu.wrap_init(f, debug_info=dbg), 1)
    c = add_fn(lu.wrap_init(f, debug_info=dbg), 2)
    assert a == b and hash(a) == hash(b)
    assert a != c
    assert a != lu.wrap_init(f, debug_info=dbg)


def test_wrap_init_debug_info():
    f = lambda x: x  # noqa: E731
    with pytest.warns(DeprecationWarning, match="missing a DebugInfo"):
        wf = lu.wrap_init(f)
    assert wf.debug_info.traced_for == "missing_debug_info" and wf.call_wrapped(7) == 7
    dbg = _dbg(f)
    assert dbg.result_paths is not None
    wf = lu.wrap_init(f, debug_info=dbg)
    assert wf.debug_info == dbg._replace(result_paths=None)


def test_cache_memoises_and_refills_stores():
    calls = []

    def trace(fun, n):
        calls.append(n)
        return fun.call_wrapped(n)

    cached = lu.cache(trace)
    f = lambda x: x * 10  # noqa: E731
    dbg = _dbg(f)

    def fresh():
        return count_aux(lu.wrap_init(f, debug_info=dbg))

    wf1, aux1 = fresh()
    assert cached(wf1, 2) == 21 and aux1() == {"seen": 2}
    wf2, aux2 = fresh()
    assert cached(wf2, 2) == 21 and calls == [2]  # a hit: no second trace
    assert aux2() == {"seen": 2}  # ... and the store is filled from the first call's
    wf3, _ = fresh()
    assert cached(wf3, 3) == 31 and calls == [2, 3]
    cached.cache_clear()
    wf4, _ = fresh()
    assert cached(wf4, 2) == 21 and calls == [2, 3, 2]


def test_merge_linear_aux():
    def filled(v):
        s = lu.transformation_with_aux2(lambda f, store, x: store.store(v))(
            lu.wrap_init(lambda x: x, debug_info=_dbg(base)))
        s[0].call_wrapped(0)
        return s[1]

    def empty():
        return lu.transformation_with_aux2(lambda f, store, x: x)(
            lu.wrap_init(lambda x: x, debug_info=_dbg(base)))[1]

    assert lu.merge_linear_aux(filled("a"), empty()) == (True, "a")
    assert lu.merge_linear_aux(empty(), filled("b")) == (False, "b")
    with pytest.raises(lu.StoreException, match="neither store occupied"):
        lu.merge_linear_aux(empty(), empty())
    with pytest.raises(lu.StoreException, match="both stores occupied"):
        lu.merge_linear_aux(filled(1), filled(2))


def test_public_names_are_jax_0_10_2s():
    assert set(lu.__all__) == {
        "Callable", "StoreException", "WrappedFun", "cache", "merge_linear_aux",
        "transformation", "transformation2", "transformation_with_aux",
        "transformation_with_aux2", "wrap_init"}
    assert all(hasattr(lu, n) for n in lu.__all__)
