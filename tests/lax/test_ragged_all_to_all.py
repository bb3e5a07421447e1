"""ragged_all_to_all inside shard_map on the CPU devices (XLA CPU has no ragged all-to-all
op; plax lowers it to all-gathers and masked copies): JAX's documented example, random
slices on 8 devices against a NumPy model, and its derivatives (it is linear)."""
import numpy as np
import pytest

import plax
from plax import lax
from plax.sharding import AxisType, PartitionSpec as P


def _mesh(n):
    return plax.make_mesh((n,), ("x",), devices=plax.devices()[:n], axis_types=(AxisType.Auto,))


def _call(n):
    def body(o, out, io, ss, oo, rs):
        return lax.ragged_all_to_all(o[0], out[0], io[0], ss[0], oo[0], rs[0],
                                     axis_name="x")[None]
    return plax.jit(plax.shard_map(body, mesh=_mesh(n), in_specs=P("x"), out_specs=P("x")))


def model(operand, output, io, ss, oo):
    """NumPy: device j's slot i goes to device i // (K / n) at output_offsets[j, i]."""
    n, k = io.shape
    out = output.copy()
    for j in range(n):
        for i in range(k):
            dst = i // (k // n)
            out[dst, oo[j, i]:oo[j, i] + ss[j, i]] = operand[j, io[j, i]:io[j, i] + ss[j, i]]
    return out


def _random_plan(n, per_device, rng):
    """Slices with random sizes, packed at each receiver in sender order."""
    k = n * per_device
    rows = out_rows = 2 * k
    ss = rng.integers(0, 3, size=(n, k))
    io = np.zeros((n, k), int)
    for j in range(n):
        io[j] = np.concatenate([[0], np.cumsum(ss[j])[:-1]])
        assert io[j, -1] + ss[j, -1] <= rows
    oo = np.zeros((n, k), int)
    rs = np.zeros((n, k), int)
    for dst in range(n):
        at = 0
        for j in range(n):
            for s in range(per_device):
                i = dst * per_device + s
                oo[j, i], rs[dst, j * per_device + s] = at, ss[j, i]
                at += ss[j, i]
        assert at <= out_rows
    return [a.astype(np.int32) for a in (io, ss, oo, rs)]


def test_jax_documented_example():
    operand = np.array([[1, 2, 2], [3, 4, 0]], np.int32)
    args = [np.array(a, np.int32) for a in ([[0, 1], [0, 1]], [[1, 2], [1, 1]],
                                            [[0, 0], [1, 2]], [[1, 1], [2, 1]])]
    got = _call(2)(operand, np.zeros((2, 4), np.int32), *args)
    np.testing.assert_array_equal(np.asarray(got), [[1, 3, 0, 0], [2, 2, 4, 0]])


@pytest.mark.parametrize("n,per_device", [(8, 1), (4, 2)])
def test_random_slices_against_numpy(n, per_device):
    rng = np.random.default_rng(n)
    plan = _random_plan(n, per_device, rng)
    operand = rng.normal(size=(n, 2 * n * per_device, 3)).astype(np.float32)
    output = np.full((n, 2 * n * per_device, 3), -1.0, np.float32)
    got = _call(n)(operand, output, *plan)
    np.testing.assert_allclose(np.asarray(got), model(operand, output, *plan[:3]))


def test_derivatives_are_the_reverse_exchange():
    n = 4
    rng = np.random.default_rng(1)
    plan = _random_plan(n, 1, rng)
    operand = rng.normal(size=(n, 2 * n, 2)).astype(np.float32)
    output = rng.normal(size=(n, 2 * n, 2)).astype(np.float32)
    weights = rng.normal(size=(n, 2 * n, 2)).astype(np.float32)
    f = _call(n)
    loss = lambda o, out: (f(o, out, *plan) * weights).sum()  # noqa: E731
    g_operand, g_output = plax.grad(loss, (0, 1))(operand, output)
    # closed form from the NumPy model, which is linear in (operand, output)
    want_operand = np.zeros_like(operand)
    io, ss, oo = plan[:3]
    for j in range(n):
        for i in range(n):
            want_operand[j, io[j, i]:io[j, i] + ss[j, i]] = weights[i, oo[j, i]:oo[j, i] + ss[j, i]]
    written = model(np.ones_like(operand), np.zeros_like(output), *plan[:3])
    np.testing.assert_allclose(np.asarray(g_operand), want_operand, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g_output), np.where(written != 0, 0, weights), rtol=1e-6)
    t_out = plax.jvp(lambda o: f(o, output, *plan), (operand,), (operand * 2,))[1]
    np.testing.assert_allclose(np.asarray(t_out), model(2 * operand, np.zeros_like(output),
                                                        *plan[:3]), rtol=1e-6)


def test_errors():
    with pytest.raises(NameError, match="unbound axis name"):
        lax.ragged_all_to_all(np.ones(3), np.ones(3), *[np.zeros(2, np.int32)] * 4,
                              axis_name="x")
    body = lambda o: lax.ragged_all_to_all(  # noqa: E731
        o, o, *[np.zeros(3, np.int32)] * 4, axis_name="x")
    with pytest.raises(ValueError, match="must be a multiple of the size of axis"):
        plax.shard_map(body, mesh=_mesh(2), in_specs=P("x"), out_specs=P("x"))(np.ones(4))
