"""What jax-md and e3nn-jax reach for: ``jax._src.api_util.infer_argnums_and_argnames``,
``jax._src.core.Primitive``, and traced values that ``copy.deepcopy`` (through
``dataclasses.astuple``) copies as JAX does: into a traced copy."""
import copy
import dataclasses
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax._src.api_util import infer_argnums_and_argnames


def _f(a, b, /, c, d=1, *args, e, **kwargs):
    pass


@pytest.mark.parametrize("argnums, argnames, want", [
    (None, None, ((), ())),
    (2, None, ((2,), ("c",))),
    ((0, 3), None, ((0, 3), ("d",))),  # (a is positional-only: no name)
    (None, "d", ((3,), ("d",))),
    (None, ("c", "e"), ((2,), ("c", "e"))),
    (1, "zz", ((1,), ("zz",))),  # both given: taken as they are
])
def test_infer_argnums_and_argnames(argnums, argnames, want):
    assert infer_argnums_and_argnames(inspect.signature(_f), argnums, argnames) == want


def test_the_names_resolve_through_the_drop_in():
    code = ("from jax._src.api_util import infer_argnums_and_argnames\n"
            "from jax._src import core\nimport jax.extend\n"
            "p = core.Primitive('mine')\n"
            "print(core.Primitive is jax.extend.core.Primitive, p.name)")
    out = subprocess.run([sys.executable, "-m", "plax", "-c", code], capture_output=True,
                         text=True, env=dict(os.environ, PLAX_NUM_CPU_DEVICES="1"), timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "mine"]


@dataclasses.dataclass
class _Chain:
    tau: object
    mass: object


def _uses_copies(x):
    tau, mass = dataclasses.astuple(_Chain(x, x * 2))  # (deep-copies its fields)
    return copy.deepcopy(tau) * mass + copy.copy(x)


@pytest.mark.parametrize("transform, want", [
    (plax.jit, lambda x: 2 * x ** 2 + x),
    (plax.grad, lambda x: 4 * x + 1),
    (plax.vmap, lambda x: 2 * x ** 2 + x),
])
def test_traced_values_copy_into_traced_copies(transform, want):
    x = np.float32(1.5) if transform is not plax.vmap else np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(transform(_uses_copies)(x), want(x), rtol=1e-6)


def test_a_deep_copy_is_a_new_traced_value():
    seen = []

    def f(x):
        y = copy.deepcopy(x)
        seen.append((y is x, type(y) is type(x)))
        return y
    assert float(plax.jit(f)(jnp.float32(2))) == 2.0 and seen == [(False, True)]
