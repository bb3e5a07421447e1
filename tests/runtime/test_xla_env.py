"""The environment jaxlib reads when it loads is set first (runtime/xla_env.py)."""
import ast
import os
import pathlib

import plax.runtime.xla as xla

XLA_SOURCE = pathlib.Path(xla.__file__).read_text()


def _imported_modules(tree) -> list:
    names = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


def test_xla_env_is_imported_before_jaxlib():
    names = _imported_modules(ast.parse(XLA_SOURCE))
    first_jaxlib = min(i for i, n in enumerate(names) if n.startswith("jaxlib"))
    assert names.index("plax.runtime.xla_env") < first_jaxlib


def test_the_variables_are_set_once_plax_is_loaded():
    # setdefault: a value the user set is kept, so only their presence is certain here.
    assert os.environ.get("TF_CPP_MIN_LOG_LEVEL") and os.environ.get("OPENBLAS_NUM_THREADS")
