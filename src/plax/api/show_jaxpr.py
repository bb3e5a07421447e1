"""show_jaxpr: a jaxpr drawn as a Graphviz graph (plax.debug.show_jaxpr; JAX has none).

The graph is built as DOT text here, so no Graphviz Python package is needed; the ``dot``
program, when it is on PATH, turns the text into an SVG, PNG or PDF picture.

How a jaxpr is drawn: the arguments and results are nodes; each equation is a node
(its primitive and key parameters); every value is an edge from the node making it to each
node using it, labelled with its type (``f32[3,4]``, with mesh axes when it carries a
sharding: ``f32[8@x,4]``). An equation holding jaxprs (jit, cond, scan, while, checkpoint,
custom_jvp/vjp, shard_map) is drawn as its node plus one cluster per held jaxpr: the
operands flow into the cluster's inputs, and the cluster's results into the node, which
hands the equation's results on.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import warnings

import numpy as np

from plax.api.jit import make_jaxpr
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Literal, open_jaxpr
from plax.core.rules import param_printers
from plax.core.source_info import flat_arg_names
from plax.core.tree_core import tree_flatten_with_path
from plax.core.tree_keys import keystr

_IMAGE_FORMATS = ("svg", "png", "pdf")
_TEXT_SUFFIXES = (".dot", ".gv")
_MAX_PARAMS = 5        # key parameters shown on an equation's node
_MAX_PARAM_TEXT = 40   # characters of one parameter's value

_GRAPH_HEAD = """digraph jaxpr {
  rankdir=TB;
  graph [fontname="Helvetica"];
  node [fontname="Helvetica", fontsize=11];
  edge [fontname="Helvetica", fontsize=9, color="#555555"];"""
_STYLE = {
    "input": 'shape=invhouse, style=filled, fillcolor="#d8f0d8"',
    "const": 'shape=invhouse, style=filled, fillcolor="#eeeeee"',
    "output": 'shape=house, style=filled, fillcolor="#f8dcc8"',
    "eqn": 'shape=box, style="rounded,filled", fillcolor="#dde8f8"',
    "holder": 'shape=box3d, style=filled, fillcolor="#f4ecc8"',
    "inner_input": 'shape=cds, style=filled, fillcolor="#ffffff", fontsize=9',
    "literal": 'shape=plaintext, fontsize=9',
}
_SHARDED_EDGE = 'color="#1f62b4", fontcolor="#1f62b4", penwidth=1.6'


def show_jaxpr(f, *args, path=None, **kwargs) -> str:
    """Draw the jaxpr of ``f(*args, **kwargs)`` as a graph and return its Graphviz DOT text.

    With ``path`` ending in ``.svg``, ``.png`` or ``.pdf`` the picture is written there by
    Graphviz's ``dot`` program (when ``dot`` is not on PATH: the DOT text goes to the same
    name ending in ``.dot``, with a warning); ending in ``.dot`` or ``.gv``, the DOT text is
    written. ``path=None`` writes nothing. ``f``'s own keyword arguments cannot be named
    ``path``.
    """
    if path is not None:
        path = os.fspath(path)
        _output_format(path)  # a bad suffix fails before tracing
    closed, out_shapes = make_jaxpr(f, return_shape=True)(*args, **kwargs)
    in_names = flat_arg_names(f, args, kwargs)
    out_names = ["out" + keystr(p) for p, _ in tree_flatten_with_path(out_shapes)[0]]
    text = jaxpr_to_dot(closed, in_names, out_names)
    if path is not None:
        _write(text, path)
    return text


def jaxpr_to_dot(closed, in_names=None, out_names=None) -> str:
    """The DOT text of a ``ClosedJaxpr`` (or ``Jaxpr``): ``in_names``/``out_names`` label
    its arguments and results (default: their positions)."""
    jaxpr = open_jaxpr(closed)
    if in_names is None or len(in_names) != len(jaxpr.invars):
        in_names = [f"in[{i}]" for i in range(len(jaxpr.invars))]
    if out_names is None or len(out_names) != len(jaxpr.outvars):
        out_names = [f"out[{i}]" for i in range(len(jaxpr.outvars))]
    g = _Graph()
    sources = {}
    for i, v in enumerate(jaxpr.constvars):
        sources[v] = (g.node(f"const {i}\n{v.aval.str_short()}", "const"), "")
    for name, v in zip(in_names, jaxpr.invars):
        sources[v] = (g.node(f"{name}\n{v.aval.str_short()}", "input"), "")
    g.body(jaxpr, sources)
    for name, v in zip(out_names, jaxpr.outvars):
        g.link(v, sources, g.node(name, "output"))
    return "\n".join([_GRAPH_HEAD, *g.lines, "}"]) + "\n"


class _Graph:
    """DOT lines under construction: nodes, edges and clusters, numbered in order."""

    def __init__(self):
        self.lines: list[str] = []
        self.depth = 1
        self.count = 0
        self.clusters = 0

    def _emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def node(self, label: str, kind: str) -> str:
        name = f"n{self.count}"
        self.count += 1
        self._emit(f'{name} [label="{_escape(label)}", {_STYLE[kind]}];')
        return name

    def edge(self, tail: str, head: str, aval, label_prefix: str = "",
             dashed: bool = False) -> None:
        attrs = [f'label="{_escape(label_prefix + aval.str_short())}"']
        if _is_sharded(aval):
            attrs.append(_SHARDED_EDGE)
        if dashed:
            attrs.append("style=dashed")
        self._emit(f"{tail} -> {head} [{', '.join(attrs)}];")

    def link(self, v, sources: dict, head: str, dashed: bool = False) -> None:
        """An edge carrying the value ``v`` to the node ``head``. ``sources`` maps each value
        to its node and, for an equation with several results, which one it is (``#1``); a
        literal gets a small node of its own, per use."""
        if isinstance(v, Literal):
            tail, which = self.node(_literal_text(v), "literal"), ""
        else:
            tail, which = sources[v]
        self.edge(tail, head, v.aval, which, dashed)

    def body(self, jaxpr: Jaxpr, sources: dict) -> None:
        """Draw ``jaxpr``'s equations, its inputs already in ``sources`` (extended here)."""
        for eqn in jaxpr.eqns:
            held = list(_held_jaxprs(eqn.params))
            if held:
                node = self._holder(eqn, held, sources)
            else:
                node = self.node(_eqn_label(eqn), "eqn")
                for v in eqn.invars:
                    self.link(v, sources, node)
            many = len(eqn.outvars) > 1
            for i, v in enumerate(eqn.outvars):
                sources[v] = (node, f"#{i} " if many else "")

    def _holder(self, eqn, held, sources) -> str:
        """An equation holding jaxprs: one cluster per jaxpr, then its node, which takes
        the clusters' results (dashed) and the operands no cluster takes."""
        fed = set()
        inner_results = []
        for title, inner in held:
            jaxpr = open_jaxpr(inner)
            operands = _operands_of(eqn, title, jaxpr)
            inner_sources = self._cluster(_cluster_title(eqn, title), jaxpr)
            if operands is not None:
                fed.update(operands)
                for i, v in zip(operands, jaxpr.invars):
                    self.link(eqn.invars[i], sources, inner_sources[v][0])
            inner_results.append((jaxpr, inner_sources))
        node = self.node(_eqn_label(eqn), "holder")
        for i, v in enumerate(eqn.invars):
            if i not in fed:
                self.link(v, sources, node)
        for jaxpr, inner_sources in inner_results:
            for v in jaxpr.outvars:
                self.link(v, inner_sources, node, dashed=True)
        return node

    def _cluster(self, title: str, jaxpr: Jaxpr) -> dict:
        """Draw a held jaxpr as a cluster; the sources of its values."""
        self._emit(f"subgraph cluster_{self.clusters} {{")
        self.clusters += 1
        self.depth += 1
        self._emit(f'label="{_escape(title)}";')
        self._emit('style="rounded,dashed"; color="#888888"; fontsize=10;')
        sources = {}
        for i, v in enumerate(jaxpr.constvars):
            sources[v] = (self.node(f"const {i}\n{v.aval.str_short()}", "const"), "")
        for v in jaxpr.invars:
            sources[v] = (self.node(v.aval.str_short(), "inner_input"), "")
        self.body(jaxpr, sources)
        self.depth -= 1
        self._emit("}")
        return sources


def _is_sharded(aval) -> bool:
    """Whether a type says its value is split over mesh axes (``f32[8@x,4]``)."""
    sharding = getattr(aval, "_sharding", None)
    return sharding is not None and any(e is not None for e in sharding.spec)


def _held_jaxprs(params):
    """``(title, jaxpr)`` for each jaxpr an equation's params hold (``branches[1]``)."""
    for key, value in params.items():
        if isinstance(value, (Jaxpr, ClosedJaxpr)):
            yield key, value
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                if isinstance(item, (Jaxpr, ClosedJaxpr)):
                    yield f"{key}[{i}]", item


def _cluster_title(eqn, title: str) -> str:
    """``jit train_step``, ``scan``, ``while: body``, ``cond: branches[1]``."""
    name = eqn.params.get("name")
    head = eqn.primitive.name + (f" {name}" if isinstance(name, str) and name else "")
    part = title.replace("_jaxpr", "")
    return head if part in ("jaxpr", "call") else f"{head}: {part}"


def _operands_of(eqn, title: str, inner: Jaxpr):
    """Which of the equation's operands feed ``inner``'s inputs, in order (``None``: not
    known, the jaxpr is drawn on its own). A while loop's cond and body each take their own
    consts and the carry; a cond's branches take every operand but the index; otherwise a
    jaxpr with one input per operand takes them in order."""
    n_in, n_ops = len(inner.invars), len(eqn.invars)
    params = eqn.params
    if eqn.primitive.name == "while" and title in ("cond_jaxpr", "body_jaxpr"):
        cn, bn = params["cond_nconsts"], params["body_nconsts"]
        consts = range(cn) if title == "cond_jaxpr" else range(cn, cn + bn)
        picked = [*consts, *range(cn + bn, n_ops)]
        return picked if len(picked) == n_in else None
    if eqn.primitive.name == "cond" and title.startswith("branches") and n_in == n_ops - 1:
        return list(range(1, n_ops))
    return list(range(n_ops)) if n_in == n_ops else None


def _eqn_label(eqn) -> str:
    printer = param_printers.get(eqn.primitive)
    params = printer(eqn.params) if printer else dict(sorted(eqn.params.items()))
    shown = [f"{k}={_param_text(v)}" for k, v in params.items() if _worth_showing(v)]
    if len(shown) > _MAX_PARAMS:
        shown = shown[:_MAX_PARAMS] + [f"(+{len(shown) - _MAX_PARAMS} more)"]
    return "\n".join([eqn.primitive.name, *shown])


def _worth_showing(value) -> bool:
    """Whether a parameter says something: not a jaxpr (drawn as a cluster), a function,
    nothing, False, or a tuple of nothing but False/None."""
    if value is None or value is False or callable(value) and not isinstance(value, type):
        return False
    if isinstance(value, (Jaxpr, ClosedJaxpr)):
        return False
    if isinstance(value, (tuple, list, frozenset, set, dict)):
        items = list(value)
        return bool(items) and not all(x is None or x is False for x in items) and \
            not any(isinstance(x, (Jaxpr, ClosedJaxpr)) for x in items)
    return True


def _param_text(value) -> str:
    if isinstance(value, np.dtype):
        text = value.name
    elif isinstance(value, type) and issubclass(value, np.generic):
        text = np.dtype(value).name
    else:
        text = str(value)
    text = " ".join(text.split())
    return text if len(text) <= _MAX_PARAM_TEXT else text[:_MAX_PARAM_TEXT - 3] + "..."


def _literal_text(v: Literal) -> str:
    value = np.asarray(v.val)
    if value.ndim == 0 and value.dtype.kind in "biufc":  # as its dtype prints it: 0.1, not
        value = value.astype(v.aval.dtype)[()]           # 0.10000000149011612
    return _param_text(value)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _output_format(path: str) -> str:
    """``"dot"`` for DOT text, else the picture format ``path``'s suffix names."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix in _TEXT_SUFFIXES:
        return "dot"
    if suffix.lstrip(".") not in _IMAGE_FORMATS:
        raise ValueError(f"show_jaxpr: path={path!r} should end in .svg, .png or .pdf (a "
                         "picture, drawn by Graphviz's dot) or .dot/.gv (the DOT text); got "
                         f"{suffix or 'no suffix'}.")
    return suffix.lstrip(".")


def _write(text: str, path: str) -> None:
    """Write the picture (or the DOT text) ``path`` asks for."""
    fmt = _output_format(path)
    dot = None if fmt == "dot" else shutil.which("dot")
    if dot is None:
        target = path if fmt == "dot" else os.path.splitext(path)[0] + ".dot"
        with open(target, "w") as fh:
            fh.write(text)
        if fmt != "dot":
            warnings.warn(f"show_jaxpr: Graphviz's dot program is not on PATH, so no {fmt} "
                          f"picture was drawn; the DOT text is in {target!r} (draw it with "
                          f"`dot -T{fmt} {target} -o {path}` once Graphviz is installed).",
                          stacklevel=3)
        return
    done = subprocess.run([dot, f"-T{fmt}", "-o", path], input=text, text=True,
                          capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"show_jaxpr: dot -T{fmt} failed writing {path!r} "
                           f"(exit status {done.returncode}): {done.stderr.strip()}")
