"""JAX 0.10.2's public surface, looked up on plax: the data and the one function that measures it.

Data (all in this folder):
- ``jax-0.10.2-public.json``: module -> public names, listed from a real ``jax==0.10.2``.
- ``jax-0.10.2-more.json``: the same for modules that list left out and libraries import
  (orbax-checkpoint, grain: array_serialization, colocated_python, topologies, ...).
- ``jax-0.10.2-pallas.json``: the same for Pallas (``jax.experimental.pallas``, ``.tpu``,
  ``.fuser``, ``.triton`` and the TPU kernels under ``.ops.tpu``).
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

# Names plax decides not to provide: (module, name) -> the reason, one line each ("*": the
# whole module, which then does not count).
_REFS_DISCHARGED = ("plax discharges reference reads/writes while tracing: its jaxprs hold no "
                    "such equations for an interpreter to match")
_MLIR_INTERNALS = ("JAX's own lowering pipeline object/registry; plax's lowering is not "
                   "JAX's and never consults it, so a stand-in would silently do nothing")
NOT_PROVIDED: dict[tuple[str, str], str] = {
    ("jax", "remove_size_one_mesh_axis_from_type"):
        "a plax array's sharding type is fixed by jaxlib when the array is made; arrays made "
        "before the flag changed would keep the old type where JAX recomputes it",
    ("jax.experimental.custom_partitioning", "*"):
        "needs XLA's SPMD partitioner to call back into Python per shard with Shardy "
        "sharding rules; not built (jaxlib's partitioner hook is there for when it is)",
    ("jax.extend.core.primitives", "device_put_p"):
        "plax's device_put is not a primitive (it moves arrays outside any trace)",
    ("jax.lax", "device_put_p"):
        "plax's device_put is not a primitive (it moves arrays outside any trace)",
    ("jax.extend.core.primitives", "empty2_p"): "an internal of JAX's scan (memory spaces)",
    ("jax.lax", "empty2_p"): "an internal of JAX's scan (memory spaces)",
    ("jax.extend.core.primitives", "get_p"): _REFS_DISCHARGED,
    ("jax.extend.core.primitives", "swap_p"): _REFS_DISCHARGED,
    ("jax.interpreters.partial_eval", "custom_partial_eval_rules"):
        "JAX's partial-eval rule convention (JaxprTrace recipes) differs from plax's table; "
        "exposing plax's under this name would silently misbehave",
    ("jax.interpreters.partial_eval", "partial_eval_jaxpr_custom_rules"):
        "JAX's unknown/instantiate equation-splitting convention, which plax's table does not use",
    **{("jax.interpreters.mlir", name): _MLIR_INTERNALS for name in (
        "ConstantHandler", "LoweringParameters", "LoweringResult", "ShapePolyLoweringState",
        "ir_tree_registry", "ir_type_handlers", "lower_jaxpr_to_module", "lowerable_effects",
        "register_constant_handler")},
    **{("jax.experimental.sparse.transform", name): (
        "a loop variable JAX's module leaves behind after registering its rules (it holds "
        "whichever rule or name came last), not an API")
       for name in ("bcoo_impl", "bcsr_impl", "impl", "method", "prim")},
    ("jax.experimental.sparse.transform", "lift_jvp"):
        "adapts the jvp_jaxpr_fun parameter of JAX's custom_jvp_call (a WrappedFun giving a "
        "jaxpr per symbolic-zero pattern); plax's custom_jvp_call holds the user's rule, so "
        "nothing in plax makes or takes that form",
}


def load_surface() -> dict[str, list[str]]:
    """The public list, the modules libraries import that it left out (the "more" list), and
    Pallas's modules."""
    surface = json.loads((HERE / "jax-0.10.2-public.json").read_text())
    surface.update(json.loads((HERE / "jax-0.10.2-more.json").read_text()))
    surface.update(json.loads((HERE / "jax-0.10.2-pallas.json").read_text()))
    return surface


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
    if "*" in exempt:
        return set()
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
        if "*" in exempt.get(module, {}):
            continue
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
