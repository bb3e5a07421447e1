"""The import layering docs/architecture.md promises, checked on the source's syntax trees.

Folders are layers (``LAYERS``, low to high): a module imports only from its own layer and
those below, at the top of the file or inside a function alike. A package ``__init__.py``
and a module outside the layers' folders (``plax/*.py``, ``experimental/``) is a public
face: it sits as high as the highest thing it imports. Module-level imports form no
cycle, no import is placed mid-file, and every rule table is defined in ``core/rules.py``.
"""
import ast
import re
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "plax"

LAYERS = (
    ("core", ("core",)),
    ("backend", ("lowering", "sharding", "runtime")),
    ("first-order primitives", ("first_order",)),
    ("transformations", ("transforms",)),
    ("higher-order primitives", ("higher_order",)),
    ("lax built on higher-order primitives", ("lax/linalg",)),
    ("Pallas kernels", ("pallas",)),
    ("interpreters", ("interpreters",)),
    ("public API", ("api",)),
    ("libraries", ("numpy", "scipy", "random", "nn")),
)


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _package_of(name: str) -> str:
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


def _resolve(name: str):
    """The plax module an import of ``name`` runs (a name inside a module: the module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _import_nodes(tree, top_level_only: bool):
    if not top_level_only:
        return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    found = []

    def visit(body):
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, (ast.If, ast.Try)):  # still module level
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", ()):
                    visit(handler.body)
                visit(getattr(node, "finalbody", ()))
    visit(tree.body)
    return found


def imports_of(name: str, top_level_only: bool = False) -> set:
    """The plax modules ``name`` imports (``from a import b`` counts ``a.b`` if it is a module)."""
    tree = ast.parse(MODULES[name].read_text())
    out = set()
    for node in _import_nodes(tree, top_level_only):
        if isinstance(node, ast.Import):
            out.update(_resolve(a.name) for a in node.names)
            continue
        base = node.module or ""
        if node.level:
            package = _package_of(name).split(".")
            base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
        for alias in node.names:
            full = f"{base}.{alias.name}"
            out.add(full if full in MODULES else _resolve(base))
    if not top_level_only and _folder_rank(name) is None:
        # A face loading a module on first use (PEP 562) names it in a string.
        out.update(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                   and isinstance(n.value, str) and n.value in MODULES)
    return {m for m in out if m and m != name and m.startswith("plax")}


def _folder_rank(name: str):
    """The layer of a module in a layer's folder (the deepest folder wins); None for a face."""
    path = MODULES[name].relative_to(SRC).as_posix()
    if MODULES[name].name == "__init__.py":
        return None
    best = None
    for rank, (_, folders) in enumerate(LAYERS):
        for folder in folders:
            if path.startswith(folder + "/") and (best is None or len(folder) > best[1]):
                best = (rank, len(folder))
    return None if best is None else best[0]


def rank(name: str, _seen=()) -> int:
    own = _folder_rank(name)
    if own is not None:
        return own
    return max((rank(m, _seen + (name,)) for m in imports_of(name) if m not in _seen),
               default=0)


def layer_name(r: int) -> str:
    return LAYERS[r][0]


LAYERED = sorted(m for m in MODULES if _folder_rank(m) is not None)


@pytest.mark.parametrize("name", LAYERED)
def test_imports_only_from_its_own_layer_and_below(name):
    mine = rank(name)
    upward = sorted(f"{m} ({layer_name(rank(m))})" for m in imports_of(name) if rank(m) > mine)
    assert upward == [], f"{name} ({layer_name(mine)}) imports from above: {upward}"


def strongly_connected(graph) -> list:
    """The strongly connected components of ``graph`` (node -> set of nodes), Tarjan's way."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def runtime_imports(name: str) -> set:
    """What importing ``name`` runs at module level: its imports, and for a module of
    another package, that package's ``__init__`` too (Python runs it first). ``plax``'s own
    ``__init__`` is left out: it is where every import starts."""
    out = set()
    for m in imports_of(name, top_level_only=True):
        out.add(m)
        package = m.rpartition(".")[0]
        while package.count("."):
            if not name.startswith(package + "."):
                out.add(package)
            package = package.rpartition(".")[0]
    out.discard(name)
    return out


def test_module_level_imports_form_no_cycle():
    graph = {m: runtime_imports(m) for m in MODULES}
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    assert cycles == []


def test_the_checks_see_a_cycle_and_the_layers():
    assert strongly_connected({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"], ["c"]]
    assert rank("plax.numpy.ufuncs") > rank("plax.api.jit") > rank("plax.higher_order.cond") \
        > rank("plax.transforms.jvp") > rank("plax.first_order.arithmetic") \
        > rank("plax.runtime.dispatch") > rank("plax.core.jaxpr")
    assert rank("plax.lax") >= rank("plax.higher_order.cond")  # the face re-exports lax.cond
    assert imports_of("plax.lax.linalg.lu") >= {"plax.higher_order.loops"}
    # Importing a module of another package runs that package's __init__ first.
    assert "plax.sharding" in runtime_imports("plax.runtime.dispatch")
    assert "plax.sharding" not in imports_of("plax.runtime.dispatch")


def test_no_mid_file_imports_or_registration_shims():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        rel = path.relative_to(SRC)
        if "E402" in text:
            offenders.append(f"{rel}: a mid-file import")
        tree = ast.parse(text)
        offenders += [f"{rel}: a {node.name}() shim" for node in ast.walk(tree)
                      if isinstance(node, ast.FunctionDef) and node.name.startswith("_register")
                      and not node.args.args]
    assert offenders == []


def test_rule_tables_are_defined_only_in_core_rules():
    defined = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) else []
            for t in targets:
                if isinstance(t, ast.Name) and t.id.lower().endswith("_rules"):
                    defined.append(f"{path.relative_to(SRC)}:{t.id}")
    outside = [d for d in defined if not d.startswith("core/rules.py:")]
    assert outside == []
    assert len(defined) >= 10  # the check sees core/rules.py's tables


def test_readme_links_the_architecture_page():
    root = SRC.parents[1]
    assert (root / "docs" / "architecture.md").is_file()
    readme = (root / "README.md").read_text()
    assert "docs/architecture.md" in readme and "../shared" not in readme


def test_architecture_page_names_every_module():
    """docs/architecture.md's tree names every module (scipy.stats' distributions share a
    line), so a new module comes with its line."""
    text = (SRC.parents[1] / "docs" / "architecture.md").read_text()
    unnamed = [p.relative_to(SRC).as_posix() for p in sorted(SRC.rglob("*.py"))
               if p.name != "__init__.py" and p.parent.name != "stats"
               and not re.search(rf"(?<![\w]){re.escape(p.stem)}(\.py)?\b", text)]
    assert unnamed == []


# The three doors to jaxlib: the XLA client, the MLIR-bindings adapter, the Mosaic adapter.
JAXLIB_DOORS = {"plax.runtime.xla", "plax.lowering.mlir_bindings", "plax.pallas.mosaic_bindings"}


def _imports_jaxlib(name: str) -> bool:
    for node in _import_nodes(ast.parse(MODULES[name].read_text()), top_level_only=False):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if not node.level else [])
        if any(n == "jaxlib" or n.startswith("jaxlib.") for n in names):
            return True
    return False


def test_only_the_three_doors_import_jaxlib():
    assert {name for name in MODULES if _imports_jaxlib(name)} == JAXLIB_DOORS
