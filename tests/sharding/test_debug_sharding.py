"""plax.debug: drawing layouts, and the collectives XLA's partitioner inserts."""
import contextlib
import io

import numpy as np
import pytest

import plax
from plax import lax
import plax.numpy as jnp
from plax.sharding import Mesh, NamedSharding, PartitionSpec as P

# Built around meshes of several devices (most of 8): deselected, not skipped, in the
# suite's one-device run (tests/conftest.py); tests marked needs_devices(1) run there too.
pytestmark = pytest.mark.needs_devices(8)


@pytest.fixture
def grid():
    return Mesh(np.array(plax.devices()[:8]).reshape(2, 4), ("a", "b"))


def test_a_sharded_contraction_has_an_all_reduce_named_with_its_source_line(grid):
    x = plax.device_put(np.ones((8, 16), np.float32), NamedSharding(grid, P("a", "b")))
    w = plax.device_put(np.ones((16, 4), np.float32), NamedSharding(grid, P("b", None)))
    compiled = plax.jit(lambda x, w: x @ w).lower(x, w).compile()
    found = compiled.collectives()
    assert [c.kind for c in found] == ["all-reduce"]
    (c,) = found
    assert c.shape == (4, 4) and c.dtype == "f32" and c.bytes == 4 * 4 * 4
    assert c.replica_groups == "{{0,1,2,3},{4,5,6,7}}"  # the four devices along 'b'
    assert c.source.endswith("test_debug_sharding.py:" + str(_line_of("lambda x, w: x @ w")))
    np.testing.assert_array_equal(np.asarray(compiled(x, w)), np.full((8, 4), 16.0))


def _line_of(text: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def test_an_elementwise_program_needs_no_collectives(grid, capsys):
    x = plax.device_put(np.ones((8, 16), np.float32), NamedSharding(grid, P("a", "b")))
    assert plax.jit(jnp.sin).lower(x).compile().collectives() == []
    assert plax.debug.explain_sharding(jnp.sin, x) == []
    assert "No collectives" in capsys.readouterr().out


def test_explain_sharding_prints_a_table(grid, capsys):
    x = plax.device_put(np.ones((8, 16), np.float32), NamedSharding(grid, P(None, "b")))
    found = plax.debug.explain_sharding(lambda x: x.sum(), x)
    out = capsys.readouterr().out
    assert [c.kind for c in found] == ["all-reduce"]
    assert out.splitlines()[0].split() == ["collective", "result", "bytes/device", "replica",
                                           "groups", "source"]
    assert "all-reduce" in out and "test_debug_sharding.py" in out


@pytest.mark.needs_devices(1)
def test_single_device_programs_have_no_collectives():
    assert plax.jit(lambda v: v * 2).lower(jnp.ones(4)).compile().collectives() == []


def test_visualize_array_sharding_draws_the_blocks(grid, capsys):
    x = plax.device_put(np.zeros((8, 8), np.float32), NamedSharding(grid, P("a", "b")))
    plax.debug.visualize_array_sharding(x, use_color=False)
    lines = [l for l in capsys.readouterr().out.splitlines() if "CPU" in l]
    assert [l.split("|")[1:-1] for l in lines] == [
        [f"CPU {i}".center(12) for i in range(4)], [f"CPU {i}".center(12) for i in range(4, 8)]]


def test_visualize_shows_replicas_together(grid, capsys):
    x = plax.device_put(np.zeros(8, np.float32), NamedSharding(grid, P("b")))
    plax.debug.visualize_array_sharding(x, use_color=False)
    (row,) = [l for l in capsys.readouterr().out.splitlines() if "CPU" in l]
    assert [cell.strip() for cell in row.split("|")[1:-1]] == ["CPU 0,4", "CPU 1,5", "CPU 2,6",
                                                              "CPU 3,7"]


def test_visualize_refuses_three_dimensions(grid):
    x = plax.device_put(np.zeros((2, 4, 2), np.float32), NamedSharding(grid, P("a", "b")))
    with pytest.raises(ValueError, match="1-D and 2-D arrays only"):
        plax.debug.visualize_array_sharding(x)


def test_inspect_array_sharding_eagerly_and_under_jit(grid):
    x = plax.device_put(np.ones((8, 8), np.float32), NamedSharding(grid, P("a", "b")))
    seen = []
    plax.debug.inspect_array_sharding(x, callback=lambda s: seen.append(("eager", s.spec)))

    def f(v):
        y = jnp.sin(v) * 2
        plax.debug.inspect_array_sharding(y, callback=lambda s: seen.append(("y", s.spec)))
        z = y.sum(0)
        plax.debug.inspect_array_sharding(z, callback=lambda s: seen.append(("z", s.spec)))
        return z + 1

    jitted = plax.jit(f)
    out = jitted(x)
    jitted(x)  # compiled once: the callbacks ran at compile time
    assert seen == [("eager", P("a", "b")), ("y", P("a", "b")), ("z", P("b"))]
    np.testing.assert_allclose(np.asarray(out), 16 * np.sin(1.0) + 1, rtol=1e-6)
    assert out.sharding.spec == P("b")

    seen.clear()
    g = plax.jit(lambda v: plax.grad(lambda u: (f(u) ** 2).sum())(v))
    np.testing.assert_allclose(np.asarray(g(x)), 2 * (16 * np.sin(1.0) + 1) * 2 * np.cos(1.0),
                               rtol=1e-5)
    assert [k for k, _ in seen] == ["y", "z"]


@pytest.mark.needs_devices(1)
def test_inspect_array_sharding_on_one_device_reports_that_device():
    seen = []
    plax.jit(lambda v: (plax.debug.inspect_array_sharding(v * 2, callback=seen.append), v)[1])(
        jnp.ones(3))
    (s,) = seen
    assert isinstance(s, plax.sharding.SingleDeviceSharding)
    assert s.device_set == {plax.devices()[0]}


def test_inspect_array_sharding_in_a_nested_jit_reports_the_layout(grid):
    x = plax.device_put(np.ones((8, 8), np.float32), NamedSharding(grid, P("a", "b")))
    seen = []
    inner = plax.jit(lambda v: (plax.debug.inspect_array_sharding(
        v * 3, callback=lambda s: seen.append(s.spec)), v * 2)[1])
    out = plax.jit(lambda v: inner(v) + 1)(x)
    assert seen == [P("a", "b")]
    np.testing.assert_allclose(np.asarray(out), 3.0)
    assert out.sharding.spec == P("a", "b")


def test_inspect_array_sharding_in_a_loop_of_a_sharded_jit_is_refused(grid):
    x = plax.device_put(np.ones((8, 8), np.float32), NamedSharding(grid, P("a", "b")))

    def body(i, v):
        plax.debug.inspect_array_sharding(v, callback=print)
        return v * 2
    with pytest.raises(NotImplementedError, match="inside a scan body of a sharded jit"):
        plax.jit(lambda v: lax.fori_loop(0, 3, body, v))(x)


def _spans(mesh, axes):
    """The groups of mesh positions that differ only along ``axes`` (NumPy's model)."""
    names = list(mesh.axis_names)
    picked = [names.index(a) for a in axes]
    rest = [i for i in range(len(names)) if i not in picked]
    pos = np.arange(mesh.devices.size).reshape(mesh.devices.shape)
    return {frozenset(g) for g in pos.transpose(rest + picked).reshape(
        -1, int(np.prod([mesh.devices.shape[i] for i in picked]))).tolist()}


def test_collectives_are_named_by_the_mesh_axes_of_the_user():
    mesh = Mesh(np.array(plax.devices()[:8]).reshape(2, 4), ("data", "model"))
    x = plax.device_put(np.ones((8, 16), np.float32), NamedSharding(mesh, P("data", "model")))

    def smap(f, out=P("data", "model")):
        return plax.shard_map(f, mesh=mesh, in_specs=P("data", "model"), out_specs=out)
    cases = [  # (program, the axes of each of its collectives)
        (lambda v: v.sum(), [("model",), ("data",)]),  # XLA writes these in its mesh form
        (lambda v: v @ np.ones((16, 2), np.float32), [("model",)]),
        (smap(lambda b: lax.psum(b, ("data", "model")), P()), [("data", "model")]),
        (smap(lambda b: lax.all_gather(b, "data", tiled=True)), [("data",)]),
        (smap(lambda b: lax.ppermute(b, "model", [(i, (i + 1) % 4) for i in range(4)])),
         [("model",)]),
    ]
    for f, axes in cases:
        found = plax.jit(f).lower(x).compile().collectives()
        assert [c.axes for c in found] == axes
        for c, a in zip(found, axes):
            if c.kind == "collective-permute":
                assert set(c.groups) == {(r * 4 + i, r * 4 + (i + 1) % 4)
                                         for r in range(2) for i in range(4)}
            else:
                assert {frozenset(g) for g in c.groups} == _spans(mesh, a)
    # explain_sharding shows the user's axis names, never XLA's positional ones
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        plax.debug.explain_sharding(lambda v: v.sum(), x)
    text = out.getvalue()
    assert "over 'model': {{0,1,2,3},{4,5,6,7}}" in text
    assert "over 'data': {{0,4},{1,5},{2,6},{3,7}}" in text and "axis_0" not in text


def test_collectives_over_a_subset_of_a_three_axis_mesh():
    mesh = Mesh(np.array(plax.devices()[:8]).reshape(2, 2, 2), ("a", "b", "c"))
    z = plax.device_put(np.ones((8, 16), np.float32), NamedSharding(mesh, P(("a", "c"), "b")))
    (c,) = plax.jit(lambda v: v.sum(0)).lower(z).compile().collectives()
    assert c.kind == "all-reduce" and c.axes == ("a", "c")
    assert {frozenset(g) for g in c.groups} == _spans(mesh, ("a", "c"))
    np.testing.assert_array_equal(np.asarray(plax.jit(lambda v: v.sum(0))(z)), np.full(16, 8.0))
