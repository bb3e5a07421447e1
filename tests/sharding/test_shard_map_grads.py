"""Gradients of shard_map, with and without the replication check, against the same
computation unsharded: replicated and split operands and results, a replicated weight
with a split batch, and losses summed inside the body. Unchecked (check_vma=False), JAX's
transpose divides a result's cotangent over its copies and sums an operand's cotangent
over the devices that share it; the numbers here are those real JAX gives."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.sharding import AxisType, PartitionSpec as P

pytestmark = pytest.mark.needs_devices(8)

X = np.arange(8, dtype=np.float32).reshape(4, 2) / 4
W = np.arange(4, dtype=np.float32).reshape(2, 2) / 3 + 1
X8 = np.arange(32, dtype=np.float32).reshape(8, 4) / 32
W4 = np.arange(16, dtype=np.float32).reshape(4, 4) / 16 - 0.3


def _line():
    return plax.make_mesh((2,), ("i",), axis_types=(AxisType.Auto,))


def _grid():
    return plax.make_mesh((2, 4), ("a", "b"), axis_types=(AxisType.Auto,) * 2)


# name: (mesh, body, in_specs, out_spec, unsharded model, operands)
CASES = {
    "split in, split out": (_line, lambda x, w: jnp.sin(x) * 2 + w[0, 0] * 0,
                            (P("i"), P()), P("i"), lambda x, w: jnp.sin(x) * 2, (X, W)),
    "replicated in, split out": (_line, lambda x, w: x @ w.T, (P("i"), P()), P("i"),
                                 lambda x, w: x @ w.T, (X, W)),
    "split in, replicated out": (_line, lambda x, w: lax.psum(jnp.sin(x).sum(0), "i") * w[0],
                                 (P("i"), P()), P(), lambda x, w: jnp.sin(x).sum(0) * w[0],
                                 (X, W)),
    "replicated in, replicated out": (_line, lambda x, w: jnp.sin(w) * 3,
                                      (P("i"), P()), P(), lambda x, w: jnp.sin(w) * 3, (X, W)),
    "psum loss, replicated weight": (_line, lambda x, w: lax.psum(((x @ w) ** 2).sum(), "i"),
                                     (P("i"), P()), P(), lambda x, w: ((x @ w) ** 2).sum(),
                                     (X, W)),
    "pmean loss": (_line, lambda x, w: lax.pmean(((x @ w) ** 2).sum(), "i"), (P("i"), P()),
                   P(), lambda x, w: ((x @ w) ** 2).sum() / 2, (X, W)),
    "2-D mesh, an axis unmentioned": (_grid, lambda x, w: jnp.tanh(x @ w), (P("a"), P()),
                                      P("a"), lambda x, w: jnp.tanh(x @ w), (X8, W4)),
    "2-D mesh, psum over one axis": (_grid, lambda x, w: lax.psum(jnp.sin(x @ w).sum(0), "a"),
                                     (P("a"), P()), P(), lambda x, w: jnp.sin(x @ w).sum(0),
                                     (X8, W4)),
}


def _loss(f):
    return lambda x, w: (f(x, w) * jnp.cos(f(x, w))).sum()  # a cotangent that is not all ones


@pytest.mark.parametrize("check_vma", [True, False])
@pytest.mark.parametrize("name", list(CASES))
def test_grad_matches_the_unsharded_computation(name, check_vma):
    make_mesh, body, in_specs, out_spec, model, args = CASES[name]
    f = plax.shard_map(body, mesh=make_mesh(), in_specs=in_specs, out_specs=out_spec,
                       check_vma=check_vma)
    expect = plax.grad(_loss(model), argnums=(0, 1))(*args)
    got = plax.jit(plax.grad(_loss(f), argnums=(0, 1)))(*args)
    for g, e in zip(got, expect):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-5, atol=1e-5)


def test_unchecked_gradient_of_a_replicated_operand_is_summed_over_devices():
    """The closed form: d/dk sum(q @ k.T) = column sums of q, over every device's rows."""
    q = np.arange(8, dtype=np.float32).reshape(4, 2)
    k = np.arange(4, dtype=np.float32).reshape(2, 2)
    f = plax.shard_map(lambda q, k: q @ k.T, mesh=_line(), in_specs=(P("i"), P()),
                       out_specs=P("i"), check_vma=False)
    loss = lambda q, k: f(q, k).sum()  # noqa: E731
    for g in (plax.grad(loss, argnums=1)(q, k), plax.jit(plax.grad(loss, argnums=1))(q, k)):
        np.testing.assert_array_equal(np.asarray(g), [[12.0, 16.0], [12.0, 16.0]])
