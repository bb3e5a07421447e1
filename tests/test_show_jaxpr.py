"""plax.debug.show_jaxpr: a jaxpr as a Graphviz graph (DOT text, and a picture with ``dot``)."""
import re
import shutil

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.debug import show_jaxpr
from plax.sharding import Mesh, PartitionSpec as P

_NODE = re.compile(r'^\s*(n\d+) \[label="((?:[^"\\]|\\.)*)"')
_EDGE = re.compile(r'^\s*(n\d+) -> (n\d+) \[label="((?:[^"\\]|\\.)*)"(.*)\];$')
_CLUSTER = re.compile(r'^\s*label="((?:[^"\\]|\\.)*)";$')


class Dot:
    """The nodes, edges and clusters of show_jaxpr's DOT text."""

    def __init__(self, text: str):
        self.labels, self.edges, self.clusters = {}, [], {}
        open_clusters = []
        for line in text.splitlines():
            if line.strip().startswith("subgraph cluster_"):
                open_clusters.append(None)
            elif line.strip() == "}" and open_clusters:
                open_clusters.pop()
            elif (m := _CLUSTER.match(line)) and open_clusters and open_clusters[-1] is None:
                open_clusters[-1] = m.group(1)
                self.clusters[m.group(1)] = set()
            elif m := _EDGE.match(line):
                self.edges.append((m.group(1), m.group(2), m.group(3).replace("\\n", "\n"),
                                   m.group(4)))
            elif m := _NODE.match(line):
                self.labels[m.group(1)] = m.group(2).replace("\\n", "\n")
                for title in open_clusters:
                    self.clusters[title].add(m.group(1))
        assert text.count("{") == text.count("}")

    def nodes(self, first_line: str) -> list:
        return [n for n, label in self.labels.items() if label.split("\n")[0] == first_line]

    def node(self, first_line: str) -> str:
        found = self.nodes(first_line)
        assert len(found) == 1, (first_line, found)
        return found[0]

    def edges_between(self, tail: str, head: str) -> list:
        return [label for t, h, label, _ in self.edges if (t, h) == (tail, head)]

    def into(self, head: str) -> list:
        return [(t, label) for t, h, label, _ in self.edges if h == head]

    def out_of(self, tail: str) -> list:
        return [(h, label) for t, h, label, _ in self.edges if t == tail]


def test_nodes_per_equation_and_edges_labelled_with_types():
    def f(x, y):
        return {"z": jnp.sin(x) @ y, "s": jnp.sum(x, axis=0)}

    x, y = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
    text = show_jaxpr(f, x, y)
    g = Dot(text)
    x_in, y_in = g.node("x"), g.node("y")
    assert g.labels[x_in] == "x\nf32[3,4]" and g.labels[y_in] == "y\nf32[4,2]"
    sin, dot, red = g.node("sin"), g.node("dot_general"), g.node("reduce_sum")
    assert g.edges_between(x_in, sin) == ["f32[3,4]"] and g.edges_between(x_in, red) == ["f32[3,4]"]
    assert g.edges_between(sin, dot) == ["f32[3,4]"] and g.edges_between(y_in, dot) == ["f32[4,2]"]
    assert "axes=(0,)" in g.labels[red].split("\n")  # key params under the primitive's name
    # outputs are nodes named by their place in the result pytree
    assert g.edges_between(dot, g.node("out['z']")) == ["f32[3,2]"]
    assert g.edges_between(red, g.node("out['s']")) == ["f32[4]"]
    # one node per equation, plus the inputs and outputs
    n_eqns = len(plax.make_jaxpr(f)(x, y).eqns)
    assert len(g.labels) == n_eqns + 2 + 2
    assert len(g.edges) == 6 and not g.clusters


def test_literals_and_multiple_results():
    def f(x):
        return lax.sort((x * 2.0, -x), num_keys=1)

    g = Dot(show_jaxpr(f, np.arange(3, dtype=np.float32)))
    mul, sort = g.node("mul"), g.node("sort")
    assert sorted(lab for _, lab in g.into(mul)) == ["f32[3]", "f32[]"]
    literal = next(t for t, lab in g.into(mul) if lab == "f32[]")
    assert g.labels[literal] == "2.0"
    # an equation with several results says which one each edge carries
    assert sorted(lab for _, lab in g.out_of(sort)) == ["#0 f32[3]", "#1 f32[3]"]


def test_cond_branches_are_clusters_fed_by_the_operands():
    def f(p, x):
        return lax.cond(p, lambda v: v * 3.0, lambda v: v - 1.0, x)

    g = Dot(show_jaxpr(f, True, np.ones(2, np.float32)))
    assert set(g.clusters) == {"cond: branches[0]", "cond: branches[1]"}
    sub, mul = g.node("sub"), g.node("mul")
    assert sub in g.clusters["cond: branches[0]"] and mul in g.clusters["cond: branches[1]"]
    cond = g.node("cond")
    assert cond not in g.clusters["cond: branches[0]"] | g.clusters["cond: branches[1]"]
    # x flows into each branch's input node; the index (from p) goes to the cond node itself
    x_in = g.node("x")
    heads = [h for h, _ in g.out_of(x_in)]
    assert len(heads) == 2 and {g.labels[h] for h in heads} == {"f32[2]"}
    assert {h in g.clusters["cond: branches[0]"] for h in heads} == {True, False}
    solid = [(t, lab) for t, h, lab, attrs in g.edges if h == cond and "dashed" not in attrs]
    assert solid == [(g.node("convert_element_type"), "i32[]")]
    dashed = [(t, lab) for t, h, lab, attrs in g.edges if h == cond and "dashed" in attrs]
    assert sorted(t for t, _ in dashed) == sorted([sub, mul])
    assert {lab for _, lab in dashed} == {"f32[2]"}
    assert g.edges_between(cond, g.node("out")) == ["f32[2]"]


def test_scan_body_cluster_sees_one_slice_and_the_result_is_stacked():
    def f(c0, xs):
        return lax.scan(lambda c, x: (c + x, c * x), c0, xs)

    text = show_jaxpr(f, np.zeros(3, np.float32), np.ones((5, 3), np.float32))
    g = Dot(text)
    assert set(g.clusters) == {"scan"}
    body = g.clusters["scan"]
    assert sorted(g.labels[n] for n in body) == ["add", "f32[3]", "f32[3]", "mul"]
    scan = g.node("scan")
    assert "length=5" in g.labels[scan].split("\n") and scan not in body
    xs_in = g.node("xs")
    (slice_in, label), = g.out_of(xs_in)
    assert slice_in in body and label == "f32[5,3]" and g.labels[slice_in] == "f32[3]"
    assert sorted(lab for _, lab in g.out_of(scan)) == ["#0 f32[3]", "#1 f32[5,3]"]
    assert "{ lambda" not in text  # the body is drawn, not printed into a label


def test_while_cond_and_body_take_their_own_consts_and_the_carry():
    def f(limit, step, x):
        return lax.while_loop(lambda c: c[0] < limit, lambda c: (c[0] + 1, c[1] * step),
                              (0, x))

    g = Dot(show_jaxpr(f, np.int32(3), np.float32(2), np.float32(1)))
    assert set(g.clusters) == {"while: cond", "while: body"}
    cond_nodes, body_nodes = g.clusters["while: cond"], g.clusters["while: body"]
    assert g.node("lt") in cond_nodes and g.node("mul") in body_nodes
    limit, step, x = g.node("limit"), g.node("step"), g.node("x")
    assert all(h in cond_nodes for h, _ in g.out_of(limit))
    assert all(h in body_nodes for h, _ in g.out_of(step))
    # the carry's float part enters both the cond and the body
    assert sorted(h in body_nodes for h, _ in g.out_of(x)) == [False, True]
    assert all(h in cond_nodes | body_nodes for h, _ in g.out_of(x))


def test_nested_jit_custom_jvp_and_checkpoint_are_clusters():
    @plax.jit
    def inner(v):
        return jnp.tanh(v)

    @plax.custom_jvp
    def g_(v):
        return jnp.exp(v)
    g_.defjvp(lambda p, t: (g_(p[0]), t[0]))

    def f(x):
        return plax.checkpoint(lambda v: g_(inner(v)))(x)

    g = Dot(show_jaxpr(f, np.ones(2, np.float32)))
    assert set(g.clusters) == {"checkpoint", "jit inner", "custom_jvp_call g_"}
    assert g.clusters["jit inner"] < g.clusters["checkpoint"]  # nested clusters
    assert g.node("tanh") in g.clusters["jit inner"]
    assert g.node("exp") in g.clusters["custom_jvp_call g_"]
    assert "name=inner" in g.labels[g.node("jit")].split("\n")


@pytest.mark.needs_devices(2)
def test_shard_map_body_and_sharded_edges():
    mesh = Mesh(np.array(plax.devices()[:2]), ("x",))
    body = plax.shard_map(lambda a: lax.psum(a, "x"), mesh=mesh, in_specs=P("x"),
                          out_specs=P())
    g = Dot(show_jaxpr(body, np.ones(8, np.float32)))
    assert set(g.clusters) == {"shard_map"}
    (inner_in, label), = g.out_of(g.node("a"))
    assert label == "f32[8]" and g.labels[inner_in].startswith("f32[4]")

    explicit = plax.make_mesh((2,), ("x",), axis_types=(plax.sharding.AxisType.Explicit,),
                              devices=plax.devices()[:2])
    with plax.set_mesh(explicit):
        a = plax.device_put(np.ones((8, 4), np.float32), P("x"))
        text = show_jaxpr(lambda a: jnp.sin(a).sum(0), a)
    sharded = [(lab, attrs) for _, _, lab, attrs in Dot(text).edges if "@" in lab]
    assert [lab for lab, _ in sharded] == ["f32[8@x,4]", "f32[8@x,4]"]
    assert all("color=" in attrs for _, attrs in sharded)
    assert all("color=" not in attrs for _, _, lab, attrs in Dot(text).edges if "@" not in lab)


def test_writing_dot_text_and_pictures(tmp_path, monkeypatch):
    def f(x):
        return lax.cond(x[0] > 0, jnp.sin, jnp.cos, x)

    x = np.ones(3, np.float32)
    text = show_jaxpr(f, x, path=tmp_path / "g.dot")
    assert (tmp_path / "g.dot").read_text() == text and text.startswith("digraph jaxpr {")
    if shutil.which("dot"):  # with Graphviz installed: the pictures themselves
        assert show_jaxpr(f, x, path=str(tmp_path / "g.svg")) == text
        assert "<svg" in (tmp_path / "g.svg").read_text()
        show_jaxpr(f, x, path=tmp_path / "g.png")
        assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # without dot: the DOT text next to the picture's name, and a warning saying so
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.warns(UserWarning, match="dot program is not on PATH"):
        assert show_jaxpr(f, x, path=tmp_path / "h.svg") == text
    assert (tmp_path / "h.dot").read_text() == text and not (tmp_path / "h.svg").exists()
    with pytest.raises(ValueError, match=r"should end in \.svg, \.png or \.pdf"):
        show_jaxpr(f, x, path=tmp_path / "g.jpeg")
