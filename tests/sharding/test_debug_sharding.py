"""plax.debug: drawing layouts, and the collectives XLA's partitioner inserts."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.sharding import Mesh, NamedSharding, PartitionSpec as P


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
