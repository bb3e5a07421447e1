"""JAX 0.10.2's public surface, looked up on plax: the data and the one function that measures it.

Data (all in this folder):
- ``jax-0.10.2-public.json``: module -> public names, listed from a real ``jax==0.10.2``.
- ``exempt_imports.json``: names those modules merely import (``jax.experimental.ode.jnp``,
  ``typing.Any``, ``functools.partial``, ...): listed by ``dir()`` but not API.
- ``awaiting.txt``: names plax does not have yet, each tagged with the issue that builds it
  (``issue-34 jax.image resize``; a whole missing module is ``issue-34 jax.image *``).
- ``NOT_PROVIDED`` below: names plax decides not to provide, each with its reason.

``python tests/surface/surface.py`` prints the figure (run it with plax importable).
"""
from __future__ import annotations

import collections
import importlib
import json
import pathlib

HERE = pathlib.Path(__file__).parent

# Names plax decides not to provide: (module, name) -> the reason, one line each.
NOT_PROVIDED: dict[tuple[str, str], str] = {}


def load_surface() -> dict[str, list[str]]:
    return json.loads((HERE / "jax-0.10.2-public.json").read_text())


def load_exempt() -> dict[str, dict[str, str]]:
    exempt = json.loads((HERE / "exempt_imports.json").read_text())
    for (module, name), reason in NOT_PROVIDED.items():
        exempt.setdefault(module, {})[name] = reason
    return exempt


def load_awaiting() -> dict[str, dict[str, str]]:
    """module -> {name or '*': issue tag}."""
    awaiting: dict[str, dict[str, str]] = collections.defaultdict(dict)
    for line in (HERE / "awaiting.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            tag, module, name = line.split()
            awaiting[module][name] = tag
    return awaiting


def plax_module_name(jax_module: str) -> str:
    return "plax" + jax_module[len("jax"):]


def has_name(module, name: str) -> bool:
    try:
        getattr(module, name)
    except Exception:  # a lazy name whose module fails to load counts as missing
        return False
    return True


def missing_names(jax_module: str, names: list[str], prefix: str = "plax") -> set[str]:
    """The names of ``jax_module`` (less its exempt ones) that plax lacks; {'*'} if the module
    does not import."""
    exempt = load_exempt().get(jax_module, {})
    try:
        module = importlib.import_module(prefix + jax_module[len("jax"):])
    except ImportError:
        return {"*"}
    return {n for n in names if n not in exempt and not has_name(module, n)}


def measure(prefix: str = "plax") -> tuple[int, int, dict[str, set[str]]]:
    """(names present, names counted, module -> missing names). An empty module counts as one
    name (itself)."""
    surface, exempt = load_surface(), load_exempt()
    present = counted = 0
    missing_by_module = {}
    for module, names in sorted(surface.items()):
        api = [n for n in names if n not in exempt.get(module, {})]
        missing = missing_names(module, names, prefix)
        total = max(1, len(api))
        counted += total
        if missing == {"*"}:
            missing_by_module[module] = missing
            continue
        present += total - len(missing) if api else 1
        if missing:
            missing_by_module[module] = missing
    return present, counted, missing_by_module


if __name__ == "__main__":
    have, total, missing = measure()
    print(f"{have} of {total} names ({100 * have / total:.1f} %); "
          f"{sum(m == {'*'} for m in missing.values())} modules missing")
    for module, names in sorted(missing.items()):
        print(f"  {module}: {' '.join(sorted(names))}")
