"""core/source_info.py's naming helpers: user functions' names and their arguments' leaves."""
import functools

import numpy as np
import pytest

import plax
from plax.core.source_info import flat_arg_names, fun_name


def _scaled(a, x):
    return a * x


class _Callable:
    def __call__(self, x):
        return x


def _outer():
    def inner(x):
        return x
    return inner


@pytest.mark.parametrize("fun, qualified, expected", [
    (_scaled, False, "_scaled"),
    (functools.partial(_scaled, 2.0), False, "_scaled"),          # a partial: its function's
    (functools.partial(functools.partial(_scaled, 2.0)), False, "_scaled"),
    (_Callable(), False, "_Callable"),                             # no __name__: the type's
    (_outer(), False, "inner"),
    (_outer(), True, "_outer.<locals>.inner"),
    (_Callable(), True, "_Callable"),
])
def test_fun_name(fun, qualified, expected):
    assert fun_name(fun, qualified=qualified) == expected


def test_flat_arg_names_name_each_leaf_by_parameter_and_key_path():
    def f(x, params, *rest, scale=1.0):
        return x

    args = (np.ones(2), {"w": np.ones(3), "b": [np.ones(1), np.ones(1)]}, 1.0, 2.0)
    names = flat_arg_names(f, args, {"scale": 3.0})
    assert names == ["x", "params['b'][0]", "params['b'][1]", "params['w']", "rest[0]",
                     "rest[1]", "scale"]
    # static positional arguments are left out
    assert flat_arg_names(f, args, {}, static=(1,)) == ["x", "rest[0]", "rest[1]"]
    # without a signature to read: positions
    assert flat_arg_names(object(), ((1.0, 2.0), 3.0), {}) == ["args[0][0]", "args[0][1]",
                                                             "args[1]"]


def test_names_reach_jit_messages_and_jaxprs():
    f = functools.partial(_scaled, 2.0)
    assert plax.make_jaxpr(f).__name__ == "make_jaxpr(_scaled)"
    assert "@jit__scaled" in plax.jit(f).lower(1.0).as_text()
    with pytest.raises(ValueError, match="static_argnums 3 is out of range for _scaled"):
        plax.make_jaxpr(f, static_argnums=3)(1.0)
