"""The import layering the architecture promises (docs/architecture.md): core <- first-order
lax <- transforms <- higher-order primitives, with every rule registered at module level."""
import ast
import pathlib
import re

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "plax"
# Lax files that use the transformations: higher-order primitives, which transform their
# bodies with the toolkit (pjit, shard_map, the generic reduce and reduce_window with their
# combiners), and special functions defined with custom_jvp.
HIGHER_ORDER_LAX = {"pjit.py", "generic_reduce.py", "windowed.py", "special.py", "shard_map.py"}


def imported_modules(path: pathlib.Path) -> set:
    """Every module ``path`` imports, at any depth of the file (functions included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def first_order_lax_files():
    return sorted(p for p in (SRC / "lax").glob("*.py")
                  if p.name not in HIGHER_ORDER_LAX and p.name != "__init__.py")


@pytest.mark.parametrize("path", first_order_lax_files(), ids=lambda p: p.name)
def test_first_order_lax_never_imports_transforms(path):
    bad = sorted(m for m in imported_modules(path) if m.startswith("plax.transforms"))
    assert bad == [], f"{path.name} imports {bad}: use plax.core.rules / plax.lax.ad_util / " \
                      "plax.lax.batch_util instead"


@pytest.mark.parametrize("path", sorted((SRC / "core").glob("*.py")), ids=lambda p: p.name)
def test_core_never_imports_lax_or_transforms(path):
    bad = sorted(m for m in imported_modules(path)
                 if m.startswith(("plax.lax", "plax.transforms", "plax.numpy")))
    assert bad == [], f"core/{path.name} imports {bad}"


@pytest.mark.parametrize("path", sorted((SRC / "transforms").glob("*.py")), ids=lambda p: p.name)
def test_transforms_never_import_higher_order_lax(path):
    hop = {f"plax.lax.{p[:-3]}" for p in HIGHER_ORDER_LAX} | {"plax.lax.control_flow"}
    bad = sorted(m for m in imported_modules(path) if any(m.startswith(h) for h in hop))
    assert bad == [], f"transforms/{path.name} imports {bad}"


def test_no_registration_shims_or_mid_file_imports():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        rel = path.relative_to(SRC)
        if re.search(r"def _register\w*\(\)", text):
            offenders.append(f"{rel}: a _register_*() shim")
        # runtime/xla.py sets an environment variable before importing jaxlib.
        if "noqa: E402" in text and str(rel) != "runtime/xla.py":
            offenders.append(f"{rel}: a mid-file import")
    assert offenders == []


def test_rule_tables_are_defined_only_in_core_rules():
    tables = {"abstract_eval_rules", "impl_rules", "jvp_rules", "transpose_rules", "batch_rules",
              "partial_eval_rules", "dce_rules", "lowering_rules", "collective_axis_names",
              "param_printers"}
    defined = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) else []
            for t in targets:
                if isinstance(t, ast.Name) and t.id in tables:
                    defined.append(f"{path.relative_to(SRC)}:{t.id}")
    assert sorted(defined) == sorted(f"core/rules.py:{t}" for t in tables)


def test_readme_links_the_architecture_page():
    root = SRC.parents[1]
    assert (root / "docs" / "architecture.md").is_file()
    readme = (root / "README.md").read_text()
    assert "docs/architecture.md" in readme and "../shared" not in readme
