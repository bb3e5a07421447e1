"""plax.api_util against JAX 0.10.2: flatten_fun, debug_info's argument names,
shaped_abstractify, static/donated argument bookkeeping, safe_map, flatten_axes. The
expected values were printed by real JAX 0.10.2 on the same inputs."""
import functools

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import api_util, tree_util
from plax.extend import linear_util as lu

from test_drop_in import assert_ok, program, run_script  # tests/ is on sys.path (conftest.py)


def _wrap(f, args=(), kwargs=None):
    return lu.wrap_init(f, debug_info=api_util.debug_info("test", f, args, kwargs or {}))


def test_flatten_fun_round_trips_args_and_kwargs():
    def f(a, b, *, c):
        return {"sum": a + b[0] + c["k"], "pair": (a, b[1])}
    args, kwargs = (1.0, (2.0, 3.0)), {"c": {"k": 4.0}}
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    flat, out_tree = api_util.flatten_fun(_wrap(f, args, kwargs), in_tree)
    out = flat.call_wrapped(*leaves)
    assert out == [1.0, 3.0, 7.0]  # dict keys sorted: "pair" before "sum"
    assert tree_util.tree_unflatten(out_tree(), out) == f(*args, **kwargs)


def test_flatten_fun_nokwargs():
    def f(x, y):
        return [x * y["a"], y["b"]]
    args = (2.0, {"a": 3.0, "b": 5.0})
    leaves, in_tree = tree_util.tree_flatten(args)
    flat, out_tree = api_util.flatten_fun_nokwargs(_wrap(f, args), in_tree)
    with pytest.raises(lu.StoreException, match="Store empty"):
        out_tree()
    out = flat.call_wrapped(*leaves)
    assert out == [6.0, 5.0] and out_tree() == tree_util.tree_structure([0, 0])


def _f(x, y, *args, z=1, **kw):
    return x


def _g(a, b, c):
    return a


class _Callable:
    def __call__(self, q):
        return q


# (fun, args, kwargs, static_argnums, static_argnames, JAX's func_name, JAX's arg_names)
DEBUG_INFO_CASES = [
    (_f, (1., {"a": 2., "b": (3., 4.)}), {}, (), (), "_f",
     ("x", "y['a']", "y['b'][0]", "y['b'][1]")),
    (_f, (1., 2., 3., [4., 5.]), {"z": 6., "w": {"k": 7.}, "v": 8.}, (), (), "_f",
     ("x", "y", "args[0]", "args[1][0]", "args[1][1]", "kw['v']", "kw['w']['k']", "z")),
    (_g, (1., 2., 3.), {}, (1,), (), "_g", ("a", "c")),
    (_g, (1., 2.), {"c": 3.}, (), ("c",), "_g", ("a", "b")),
    (_g, (1.,), {"c": 3., "b": (2., None)}, (), (), "_g", ("a", "b[0]", "c")),
    (_g, (1., 2., 3.), {}, (-1,), (), "_g", ("a", "b")),
    (_g, (1., 2., 3., 4.), {"k": 5.}, (), (), "_g",  # does not fit the signature
     ("args[0]", "args[1]", "args[2]", "args[3]", "kwargs['k']")),
    (lambda *a, **k: 0, (1., 2.), {"k": 5.}, (), (), "<lambda>", ("a[0]", "a[1]", "k")),
    (functools.partial(_g, 1.), (2., 3.), {}, (), (), "_g", ("b", "c")),
    (max, (1., 2.), {}, (), (), "max", ("args[0]", "args[1]")),
    (_Callable(), ([1., 2.],), {}, (), (), "<unknown>", ("q[0]", "q[1]")),
    (_g, (None, [], {"x": 1.}), {}, (), (), "_g", ("c['x']",)),
]


@pytest.mark.parametrize("fun,args,kwargs,static_nums,static_names,name,arg_names",
                         DEBUG_INFO_CASES)
def test_debug_info_arg_names_match_jax(fun, args, kwargs, static_nums, static_names, name,
                                        arg_names):
    dbg = api_util.debug_info("jit", fun, args, kwargs, static_argnums=static_nums,
                              static_argnames=static_names)
    assert (dbg.traced_for, dbg.func_name, dbg.arg_names) == ("jit", name, arg_names)


def test_debug_info_source_location_and_saved_info():
    dbg = api_util.debug_info("jit", _g, (1, 2, 3), {})
    assert dbg.func_src_info == f"_g at {__file__}:{_g.__code__.co_firstlineno}"
    wrapper = lambda *a: _g(*a)  # noqa: E731
    wrapper.__fun_debug_info__ = dbg
    assert api_util.debug_info("vmap", wrapper, (1,), {}) is dbg
    assert api_util.debug_info("jit", _g, (1, 2, 3), {}, sourceinfo="h").func_src_info == "h"


@pytest.mark.parametrize("value,shape,dtype,weak", [
    (np.ones((2, 3), np.float32), (2, 3), np.float32, False),
    (1.0, (), np.float32, True),
    (2, (), np.int32, True),
    (True, (), np.bool_, False),
    (1j, (), np.complex64, True),
    (np.float32(1), (), np.float32, False),
    (np.ones(2, np.float64), (2,), np.float32, False),  # canonicalised, x64 off
    (plax.ShapeDtypeStruct((2,), jnp.float32), (2,), np.float32, False),
    (plax.ShapeDtypeStruct((4, 1), jnp.int32, weak_type=True), (4, 1), np.int32, True),
])
def test_shaped_abstractify(value, shape, dtype, weak):
    aval = api_util.shaped_abstractify(value)
    assert (aval.shape, aval.dtype, aval.weak_type) == (shape, np.dtype(dtype), weak)


def test_shaped_abstractify_arrays_tracers_and_errors():
    assert repr(api_util.shaped_abstractify(jnp.ones(3))) == "ShapedArray(float32[3])"
    assert repr(api_util.shaped_abstractify(jnp.float32(3.))) == "ShapedArray(float32[])"
    seen = []
    plax.jit(lambda x: seen.append(api_util.shaped_abstractify(x)) or x)(jnp.ones((2, 2)))
    assert repr(seen[0]) == "ShapedArray(float32[2,2])"
    aval = seen[0]
    assert api_util.shaped_abstractify(aval) is aval
    with pytest.raises(TypeError, match="is not a valid JAX type"):
        api_util.shaped_abstractify("s")


def test_donation_vector():
    in_tree = tree_util.tree_structure(
        ((1., (2., 3.), [4.]), {"a": 5., "b": (6., 7.)}))
    assert api_util.donation_vector((0, 2), ("b",), in_tree) == (
        True, False, False, True, False, True, True)
    assert api_util.donation_vector((1,), (), in_tree) == (
        False, True, True, False, False, False, False)
    args_only = tree_util.tree_structure((1., (2., 3.)))
    assert api_util.donation_vector((1,), (), args_only, False) == (False, True, True)


def test_rebase_donate_argnums():
    assert api_util.rebase_donate_argnums((3, 4), (0, 1)) == (1, 2)
    assert api_util.rebase_donate_argnums((0, 2, 5), (1, 3)) == (0, 1, 3)
    assert api_util.rebase_donate_argnums((2, 0), ()) == (0, 2)
    assert api_util.rebase_donate_argnums((), (1,)) == ()
    with pytest.raises(ValueError, match="`donate_argnums` .* cannot intersect"):
        api_util.rebase_donate_argnums((1,), (1,))


def test_argnums_partial():
    fun = lambda a, b, c, d=0: (a, b, c, d)  # noqa: E731
    wf = _wrap(fun, (1, 2, 3))
    part, dyn = api_util.argnums_partial(wf, (0, 2), (1, "s", 3))
    assert dyn == (1, 3) and part.call_wrapped(10, 30, d=4) == (10, "s", 30, 4)
    part, dyn = api_util.argnums_partial(wf, -1, (1, 2, 3))
    assert dyn == (3,) and part.call_wrapped(9) == (1, 2, 9, 0)
    part, _ = api_util.argnums_partial(wf, 0, (1, [2], 3), require_static_args_hashable=False)
    assert part.call_wrapped(5) == (5, [2], 3, 0)
    with pytest.raises(ValueError, match=r"Static argument \(index 1\) of type <class 'list'> "
                                         "for function <lambda> is non-hashable"):
        api_util.argnums_partial(wf, 0, (1, [2]))
    with pytest.raises(ValueError, match="but got value 5 for len.args. == 2"):
        api_util.argnums_partial(wf, 5, (1, 2))
    # Static arguments key the function by value and exact type (as a jit cache would).
    same = [api_util.argnums_partial(wf, 0, (1, s, 3))[0] for s in (2, 2, 2.0)]
    assert same[0] == same[1] and hash(same[0]) == hash(same[1]) and same[0] != same[2]


def test_safe_map():
    assert api_util.safe_map(lambda a, b: a + b, [1, 2], (3, 4)) == [4, 6]
    with pytest.raises(ValueError, match="safe_map.. argument 2 is shorter than argument 1"):
        api_util.safe_map(lambda a, b: a + b, [1, 2], (3,))
    with pytest.raises(ValueError, match="safe_map.. argument 3 is longer than argument 1"):
        api_util.safe_map(lambda a, b, c: a, [1], [2], [3, 4])


def test_flatten_axes():
    tree = tree_util.tree_structure(((1., {"a": 2., "b": 3.}),))
    assert api_util.flatten_axes("vmap in_axes", tree, (0,)) == [0, 0, 0]
    assert api_util.flatten_axes("vmap in_axes", tree, ((None, {"a": 1, "b": 0}),)) == [
        None, 1, 0]
    with pytest.raises(ValueError, match="vmap in_axes specification must be a tree prefix"):
        api_util.flatten_axes("vmap in_axes", tree, (0, 1))
    one_arg = tree_util.tree_structure(((1., 2.),))
    with pytest.raises(ValueError, match="might need to be wrapped in a singleton tuple"):
        api_util.flatten_axes("vmap in_axes", one_arg, (0, 1), tupled_args=True)
    args_kwargs = tree_util.tree_structure((((1., 2.),), {"k": 3.}))
    assert api_util.flatten_axes("pmap in_axes", args_kwargs, ((1,), 0), kws=True) == [1, 1, 0]
    with pytest.raises(ValueError, match=r"(?s)pmap in_axes specification.*pmap in_axes\[0\]"):
        api_util.flatten_axes("pmap in_axes", args_kwargs, (((0, 1, 2),), 0), kws=True)


def test_api_util_loads_lazily_and_is_complete():
    assert plax.api_util is api_util
    assert set(api_util.__all__) == {
        "argnums_partial", "debug_info", "donation_vector", "flatten_axes", "flatten_fun",
        "flatten_fun_nokwargs", "rebase_donate_argnums", "safe_map", "shaped_abstractify"}


def test_jax_program_using_linear_util_and_api_util(tmp_path):
    """Library-style code (flax, numpyro, haiku) under `python -m plax`; expected lines
    printed by real JAX 0.10.2."""
    proc = run_script(tmp_path, program("linear_util_and_api_util"))
    assert_ok(proc, "('x', \"y['a']\", \"y['b']\")", "{'p': 8.0, 's': 5.0}",
              "2 PyTreeDef({'p': *, 's': *})")


def _kw_fun(x, y, z=5, *, kw=True):
    return x


def _var_kw_fun(x, **kw):
    return x


@pytest.mark.parametrize("fun,args,kwargs,expected", [
    (_kw_fun, (1, 2), {"z": 3}, (1, 2, 3)),
    (_kw_fun, (1, 2), {}, (1, 2, 5)),            # defaults fill positions
    (_kw_fun, (1,), {"y": 2, "z": 3}, (1, 2, 3)),
    (_var_kw_fun, (1,), {}, (1,))])
def test_resolve_kwargs(fun, args, kwargs, expected):
    from plax._src import api_util as src_api_util
    assert src_api_util.resolve_kwargs(fun, args, kwargs) == expected


@pytest.mark.parametrize("fun,kwargs,name", [(_kw_fun, {"kw": False}, "kw"),
                                              (_var_kw_fun, {"a": 2}, "a")])
def test_resolve_kwargs_without_a_position(fun, kwargs, name):
    from plax._src import api_util as src_api_util
    with pytest.raises(TypeError, match=f"could not be resolved to positions: {name}"):
        src_api_util.resolve_kwargs(fun, (1, 2) if fun is _kw_fun else (1,), kwargs)
