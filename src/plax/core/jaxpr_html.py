"""A jaxpr as a self-contained HTML page (``jax._src.jaxpr_util.jaxpr_to_html``): the printed
jaxpr, each equation clickable to show the user stack it was staged from, and a search over
the text and the stacks' files and functions.

The page carries its data as gzipped, base64-encoded JSON (``const base64Data``) that its
script unpacks in the browser:

- ``strings``: file and function names, referred to by index;
- ``frames``: ``{"file", "function", "line", "column"}`` of each distinct user frame;
- ``dag``: the stacks as a tree of ``{"frame", "parent"}`` nodes (parent: the caller's node,
  null at the outermost frame), so that stacks sharing callers share nodes;
- ``lines``: the printed jaxpr's lines as HTML, each equation's text in a
  ``<span class="eqn" data-tb="<node>">`` naming its innermost frame's node;
- ``string_to_lines``: ``{string index: [line numbers]}``, the lines whose equations' stacks
  mention the string.
"""
from __future__ import annotations

import base64
import gzip
import html
import json

from plax.core.jaxpr import equation_lines
from plax.core.jaxpr_stats import _canonical_filename, _open, all_eqns_with_traceback
from plax.core.source_info import code_position


class _Stacks:
    """Interns strings, frames and stack nodes."""

    def __init__(self):
        self.strings: dict = {}
        self.frame_ids: dict = {}  # (code, lasti) -> index in frames
        self.frames: list = []
        self.nodes: dict = {}      # (frame index, parent node) -> index in dag
        self.dag: list = []

    def string(self, s: str) -> int:
        return self.strings.setdefault(s, len(self.strings))

    def frame(self, code, lasti) -> int:
        key = (code, lasti)
        if key not in self.frame_ids:
            line, column = code_position(code, lasti)
            self.frame_ids[key] = len(self.frames)
            self.frames.append({
                "file": self.string(_canonical_filename(code.co_filename, None)),
                "function": self.string(code.co_qualname), "line": line, "column": column})
        return self.frame_ids[key]

    def node(self, tb) -> int | None:
        """The node of ``tb``'s innermost frame (None for an empty stack)."""
        parent = None
        codes, lastis = tb.raw_frames()
        for code, lasti in reversed(list(zip(codes, lastis))):  # outermost first
            key = (self.frame(code, lasti), parent)
            if key not in self.nodes:
                self.nodes[key] = len(self.dag)
                self.dag.append({"frame": key[0], "parent": parent})
            parent = self.nodes[key]
        return parent

    def names_of(self, node: int):
        """The string indices of the files and functions on ``node``'s stack."""
        while node is not None:
            frame = self.frames[self.dag[node]["frame"]]
            yield frame["file"]
            yield frame["function"]
            node = self.dag[node]["parent"]


def jaxpr_to_html(jaxpr, *, width: int = 80) -> str:
    """``jaxpr`` (a Jaxpr or ClosedJaxpr) printed at ``width`` as an HTML page whose
    equations show, when clicked, the user stack that staged them."""
    j = _open(jaxpr)
    tracebacks = {id(eqn): tb for tb, eqn in all_eqns_with_traceback(j, None, set())}
    stacks = _Stacks()
    lines, string_to_lines = [], {}
    for number, (text, starts) in enumerate(equation_lines(j, width=width)):
        ends = [column for column, _ in starts[1:]] + [len(text)]
        out = [html.escape(text[:starts[0][0]] if starts else text, quote=False)]
        for (column, eqn), end in zip(starts, ends):
            piece = html.escape(text[column:end], quote=False)
            tb = tracebacks.get(id(eqn))
            node = stacks.node(tb) if tb is not None else None
            if node is None:
                out.append(piece)
                continue
            out.append(f'<span class="eqn" data-tb="{node}">{piece}</span>')
            for k in stacks.names_of(node):
                string_to_lines.setdefault(k, set()).add(number)
        lines.append("".join(out))
    data = {"strings": list(stacks.strings), "frames": stacks.frames, "dag": stacks.dag,
            "lines": lines,
            "string_to_lines": {str(k): sorted(v) for k, v in string_to_lines.items()}}
    packed = base64.b64encode(gzip.compress(json.dumps(data).encode("utf-8"))).decode("ascii")
    from plax.core.config import config
    url = config.read("jax_source_url_schema") or ""
    return _PAGE.replace("__DATA__", packed).replace("__SOURCE_URL__", json.dumps(url))


_PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>jaxpr</title>
<style>
  body { margin: 0; display: flex; height: 100vh; }
  #jaxpr-container { flex: 3; overflow: auto; padding: 8px; font: 13px monospace;
                     white-space: pre; background: #fafafa; }
  #panel { flex: 1; overflow: auto; padding: 8px; border-left: 1px solid #ccc;
           font: 13px sans-serif; }
  .eqn { cursor: pointer; background: #eaf1fe; }
  .eqn.picked { background: #bcd3fa; }
  .hit { background: #fff4a3; }
  #trace li { font-family: monospace; margin-bottom: 4px; }
</style>
</head>
<body>
<div id="jaxpr-container">Unpacking the jaxpr...</div>
<div id="panel">
  <input id="search" size="30" placeholder="Search text, files, functions">
  <span id="count"></span>
  <h4>Staged at (innermost first)</h4>
  <ol id="trace"><li>Click an equation.</li></ol>
</div>
<script>
  const base64Data = "__DATA__";
  const sourceUrl = __SOURCE_URL__;

  async function unpack() {
    const bytes = Uint8Array.from(atob(base64Data), c => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  unpack().then(data => {
    const box = document.getElementById("jaxpr-container");
    box.innerHTML = data.lines.map(l => `<div class="line">${l || " "}</div>`).join("");
    const rows = box.querySelectorAll(".line");

    box.addEventListener("click", ev => {
      const span = ev.target.closest(".eqn");
      if (!span) return;
      box.querySelectorAll(".picked").forEach(e => e.classList.remove("picked"));
      span.classList.add("picked");
      const items = [];
      for (let n = Number(span.dataset.tb); n !== null; n = data.dag[n].parent) {
        const f = data.frames[data.dag[n].frame];
        const file = data.strings[f.file], where = `${file}:${f.line}`;
        const li = document.createElement("li");
        const a = document.createElement(sourceUrl ? "a" : "span");
        if (sourceUrl) {
          a.href = sourceUrl.replace("{file}", file).replace("{line}", f.line);
          a.target = "_blank";
        }
        a.textContent = where;
        li.append(a, ` in ${data.strings[f.function]}`);
        items.push(li);
      }
      document.getElementById("trace").replaceChildren(...items);
    });

    document.getElementById("search").addEventListener("input", ev => {
      const q = ev.target.value.trim().toLowerCase();
      const hits = new Set();
      if (q) {
        data.strings.forEach((s, k) => {
          if (!s.toLowerCase().includes(q)) return;
          (data.string_to_lines[k] || []).forEach(i => hits.add(i));
        });
        rows.forEach((r, i) => { if (r.textContent.toLowerCase().includes(q)) hits.add(i); });
      }
      rows.forEach((r, i) => r.classList.toggle("hit", hits.has(i)));
      document.getElementById("count").textContent = q ? `${hits.size} lines` : "";
      if (hits.size) rows[Math.min(...hits)].scrollIntoView({block: "center"});
    });
  });
</script>
</body>
</html>
"""
