"""Every primitive plax defines has the rules the transformations need.

For each primitive defined by a module under ``plax.`` (found by scanning the
imported plax modules for the Primitive objects they hold) there is one test per
rule kind, so a failure names the primitive and the missing rule:

* an abstract evaluation rule (staging, ``eval_shape``, lowering all need it);
* a lowering rule for the "cpu" platform;
* a batching rule (``vmap``);
* a JVP rule (``jvp``, ``grad``, ``linearize``);
* a transpose rule, when the primitive is marked linear (``linear_primitives``).

A rule that is missing on purpose, or not written yet, is listed in ``EXEMPTIONS``
with the reason and the issue that will add it. ``test_exemption_is_still_needed``
fails once an exempted rule arrives (or its primitive disappears), so the list only
shrinks.
"""
import importlib
import os
import pkgutil
import subprocess
import sys

import pytest

import plax
from plax.core import rules
from plax.core.primitive import Primitive

RULE_KINDS = ("abstract_eval", "lowering", "batch", "jvp", "transpose")

_NULLARY_BATCH = (
    "nullary and communicates over no axis: vmap binds it unbatched and never consults a "
    "batch rule")
_NOT_NEEDED = "none: not needed by design"
_LOWERING_ONLY = ("the internal LAPACK custom call exists only inside CPU lowering rules, after "
                  "every transformation has run")

# (primitive name, rule kind) -> (reason, issue that will fill it).
EXEMPTIONS = {
    ("pmax", "jvp"): ("differentiating pmax (ties across the axis) is not implemented yet",
                      "issue 14"),
    ("pmin", "jvp"): ("differentiating pmin (ties across the axis) is not implemented yet",
                      "issue 14"),
    ("iota", "batch"): (_NULLARY_BATCH, _NOT_NEEDED),
    ("lapack_call", "batch"): (_LOWERING_ONLY, _NOT_NEEDED),
    ("lapack_call", "jvp"): (_LOWERING_ONLY, _NOT_NEEDED),
}


def _import_every_plax_module():
    """Import every module of the package, so primitives of modules ``import plax`` does not
    import eagerly are checked too (an import error fails collection, naming the module)."""
    for info in pkgutil.walk_packages(plax.__path__, "plax."):
        if info.name.rsplit(".", 1)[-1] != "__main__":
            importlib.import_module(info.name)


def _held_primitives(value):
    """The primitives a module attribute holds: itself, or the items of a container."""
    if isinstance(value, Primitive):
        return [value]
    if isinstance(value, dict):
        return [v for v in value.values() if isinstance(v, Primitive)]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [v for v in value if isinstance(v, Primitive)]
    return []


# The registries themselves (``all_primitives``, ``linear_primitives``, ...) hold every
# primitive, test ones included: holding a primitive there does not make a module its owner.
_REGISTRIES = {id(v) for v in vars(rules).values() if isinstance(v, (dict, list, set))}


def _plax_owners():
    """primitive -> names of the plax modules that hold it at module level."""
    owners = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "plax" or name.startswith("plax.")):
            continue
        for value in list(vars(module).values()):
            if id(value) in _REGISTRIES:
                continue
            for prim in _held_primitives(value):
                owners.setdefault(prim, set()).add(name)
    return owners


_import_every_plax_module()
OWNERS = _plax_owners()
# Primitives other tests create are not held by plax modules; "test_" names never count.
PRIMITIVES = [p for p in rules.all_primitives
              if p in OWNERS and not p.name.startswith("test_")]
BY_NAME = {p.name: p for p in PRIMITIVES}


def _required(prim, kind) -> bool:
    return kind != "transpose" or prim in rules.linear_primitives


def _has_rule(prim, kind) -> bool:
    if kind == "abstract_eval":
        return prim in rules.abstract_eval_rules
    if kind == "lowering":
        return rules.lowering_rule(prim, "cpu") is not None
    if kind == "batch":
        return prim in rules.batch_rules
    if kind == "jvp":
        return prim in rules.jvp_rules
    if kind == "transpose":
        return prim in rules.transpose_rules
    raise ValueError(f"unknown rule kind {kind!r}")


def _cases():
    for prim in PRIMITIVES:
        for kind in RULE_KINDS:
            # Exempted pairs are checked by test_exemption_is_still_needed instead.
            if _required(prim, kind) and (prim.name, kind) not in EXEMPTIONS:
                yield pytest.param(prim, kind, id=f"{prim.name}-{kind}")


@pytest.mark.parametrize("prim, kind", list(_cases()))
def test_primitive_has_rule(prim, kind):
    assert _has_rule(prim, kind), (
        f"primitive {prim.name!r} (defined in {sorted(OWNERS[prim])}) has no {kind} rule")


@pytest.mark.parametrize("name, kind", sorted(EXEMPTIONS), ids=lambda v: v)
def test_exemption_is_still_needed(name, kind):
    assert kind in RULE_KINDS, f"exemption ({name!r}, {kind!r}) names an unknown rule kind"
    assert name in BY_NAME, f"exemption for {name!r}: plax defines no such primitive"
    prim = BY_NAME[name]
    assert _required(prim, kind), (
        f"exemption ({name!r}, {kind!r}): the rule is not required ({name!r} is not linear)")
    assert not _has_rule(prim, kind), (
        f"{name!r} now has a {kind} rule: remove its exemption from EXEMPTIONS")
    reason, issue = EXEMPTIONS[(name, kind)]
    assert reason and issue


def test_discovery_finds_the_primitives_of_every_family():
    """Guards the scan itself: if it found nothing, every coverage test would vanish."""
    for name in ("add", "sin", "convert_element_type", "broadcast_in_dim", "iota",
                 "reduce_sum", "cumsum", "reduce", "sort", "gather", "scatter-add",
                 "dot_general", "pjit", "checkpoint", "psum", "axis_index",
                 "custom_jvp_call", "custom_vjp_call"):
        assert name in BY_NAME, f"the scan of plax modules did not find primitive {name!r}"


def test_primitive_names_are_unique():
    names = [p.name for p in PRIMITIVES]
    assert sorted({n for n in names if names.count(n) > 1}) == []


_LIST_PRIMITIVES = """
import importlib, pkgutil
import plax
from plax.core import rules
for info in pkgutil.walk_packages(plax.__path__, "plax."):
    if info.name.rsplit(".", 1)[-1] != "__main__":
        importlib.import_module(info.name)
print("\\n".join(p.name for p in rules.all_primitives))
"""


def test_every_primitive_plax_creates_is_seen_by_the_scan():
    """In a fresh interpreter (no test primitives), everything importing plax creates must be
    held by some plax module; a primitive made inside a function and kept only in the rule
    tables would otherwise escape the coverage tests above."""
    env = dict(os.environ, PLAX_NUM_CPU_DEVICES=os.environ.get("PLAX_NUM_CPU_DEVICES", "8"))
    out = subprocess.run([sys.executable, "-c", _LIST_PRIMITIVES], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    created = [n for n in out.stdout.split("\n") if n]
    assert created, "importing plax created no primitives"
    assert sorted(set(created) - set(BY_NAME)) == []
