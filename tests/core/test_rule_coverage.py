"""Every primitive plax defines has the rules the transformations need.

For each primitive defined by a module under ``plax.`` (found by scanning the
imported plax modules for the Primitive objects they hold) there is one test per
rule kind, so a failure names the primitive and the missing rule:

* an abstract evaluation rule (staging, ``eval_shape``, lowering all need it);
* a lowering rule for the "cpu" platform;
* a batching rule (``vmap``);
* a JVP rule (``jvp``, ``grad``, ``linearize``);
* a transpose rule, when the primitive is marked linear (``linear_primitives``);
* a partial-eval rule (``linearize``, ``grad``'s residuals) and a DCE rule, when the
  primitive's equations hold jaxprs (found by tracing a tiny use of every public API that
  builds one, under the transformations: see ``JAXPR_HOLDERS``).

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

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core import rules
from plax.core.jaxpr import open_jaxpr, subjaxprs
from plax.core.primitive import Primitive

RULE_KINDS = ("abstract_eval", "lowering", "batch", "jvp", "transpose", "partial_eval", "dce")

_NULLARY_BATCH = (
    "nullary and communicates over no axis: vmap binds it unbatched and never consults a "
    "batch rule")
_NOT_NEEDED = "none: not needed by design"
_SCALAR_COMBINER = (
    "the jaxpr it holds is a combiner of scalars, with nothing to split or prune: the "
    "equation is staged whole when an operand is unknown and kept whole while a result is "
    "used (JAX has no such rule either)")
_ONE_SIDED = "a one-sided send or receive (GPUs only), paired with its partner by channel"
_LOWERING_ONLY = ("the internal LAPACK custom call exists only inside CPU lowering rules, after "
                  "every transformation has run")

_DISCHARGED = ("a state primitive on a Ref: every program is discharged (transforms/discharge.py "
               "turns it into array operations) before lowering, as in JAX")
_PINNED = ("a pinned buffer is an opaque value for one program's memory placement: JAX has no "
           "such rule either")
_PLACEMENT = ("pltpu.with_memory_space_constraint types a kernel operand with the memory "
              "space XLA should place it in, right before the pallas_call: JAX 0.10.2 gives "
              "it no derivative or batching rule either")

_GPU_ONLY = ("a GPU kernel instruction (Triton inline asm or barrier, Mosaic GPU's "
             "print_layout): only a GPU lowers it, and plax has no GPU backend, so a kernel "
             "using it fails off a GPU as JAX's does (JAX 0.10.2 gives it no such rule either)")
_KERNEL_ONLY = ("a TPU kernel primitive on references: it lives only inside a pallas_call "
                "kernel, discharged in interpret mode and lowered by its Mosaic rule; vmap and "
                "jvp transform the pallas_call as a whole (JAX 0.10.2 gives it no such rule "
                "either)")

# (primitive name, rule kind) -> (reason, issue that will fill it).
EXEMPTIONS = {
    ("get", "lowering"): (_DISCHARGED, _NOT_NEEDED),
    ("swap", "lowering"): (_DISCHARGED, _NOT_NEEDED),
    ("addupdate", "lowering"): (_DISCHARGED, _NOT_NEEDED),
    ("pin", "batch"): (_PINNED, _NOT_NEEDED),
    ("pin", "jvp"): (_PINNED, _NOT_NEEDED),
    ("unpin", "batch"): (_PINNED, _NOT_NEEDED),
    ("unpin", "jvp"): (_PINNED, _NOT_NEEDED),
    ("with_memory_space_constraint", "batch"): (_PLACEMENT, _NOT_NEEDED),
    ("with_memory_space_constraint", "jvp"): (_PLACEMENT, _NOT_NEEDED),
    ("pmax", "jvp"): ("differentiating pmax (ties across the axis) is not implemented yet",
                      "issue 14"),
    ("pmin", "jvp"): ("differentiating pmin (ties across the axis) is not implemented yet",
                      "issue 14"),
    ("iota", "batch"): (_NULLARY_BATCH, _NOT_NEEDED),
    ("select_and_scatter", "batch"): ("the general select_and_scatter (traced select and "
                                      "scatter): JAX 0.10.2 gives it no batching rule either",
                                      _NOT_NEEDED),
    ("select_and_scatter", "jvp"): ("the general select_and_scatter: JAX 0.10.2 gives it no "
                                    "differentiation rule either", _NOT_NEEDED),
    ("scaled_dot", "jvp"): ("JAX 0.10.2's scaled_dot is not differentiable either",
                            _NOT_NEEDED),
    ("rng_uniform", "batch"): ("XLA's unkeyed generator: JAX 0.10.2 gives it no batching rule "
                               "either (vmap raises)", _NOT_NEEDED),
    ("rng_uniform", "jvp"): ("XLA's unkeyed generator: JAX 0.10.2 gives it no differentiation "
                             "rule either", _NOT_NEEDED),
    ("lapack_call", "batch"): (_LOWERING_ONLY, _NOT_NEEDED),
    ("lapack_call", "jvp"): (_LOWERING_ONLY, _NOT_NEEDED),
    ("psend", "jvp"): (_ONE_SIDED + "; JAX 0.10.2 does not differentiate it either",
                       _NOT_NEEDED),
    ("precv", "jvp"): (_ONE_SIDED + "; JAX 0.10.2 does not differentiate it either",
                       _NOT_NEEDED),
    ("psend", "batch"): (_ONE_SIDED + ", between devices: a vmapped axis has no partner "
                         "program to receive it (JAX's rule, ppermute's, cannot apply to a "
                         "token)", _NOT_NEEDED),
    ("precv", "batch"): (_ONE_SIDED + ", between devices: a vmapped axis has no partner "
                         "program to send it", _NOT_NEEDED),
    ("reduce", "partial_eval"): (_SCALAR_COMBINER, _NOT_NEEDED),
    ("reduce", "dce"): (_SCALAR_COMBINER, _NOT_NEEDED),
    ("reduce_window", "partial_eval"): (_SCALAR_COMBINER, _NOT_NEEDED),
    ("reduce_window", "dce"): (_SCALAR_COMBINER, _NOT_NEEDED),
    **{(name, kind): (_KERNEL_ONLY, _NOT_NEEDED)
       for name in ("semaphore_signal", "semaphore_wait", "semaphore_read", "dma_start",
                    "dma_wait")
       for kind in ("lowering", "batch", "jvp")},
    ("tpu_custom_call", "jvp"): ("a Mosaic module run as written (mosaic.as_tpu_kernel): JAX "
                                 "0.10.2 does not differentiate it either", _NOT_NEEDED),
    ("trace_value", "jvp"): (_KERNEL_ONLY, _NOT_NEEDED),
    ("delay", "jvp"): (_KERNEL_ONLY, _NOT_NEEDED),
    ("add_dependency", "lowering"): (_KERNEL_ONLY, _NOT_NEEDED),
    ("add_dependency", "jvp"): (_KERNEL_ONLY, _NOT_NEEDED),
    **{(name, kind): (_GPU_ONLY, _NOT_NEEDED)
       for name in ("elementwise_inline_asm_p", "debug_barrier_p", "print_layout")
       for kind in ("lowering", "batch", "jvp")},
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


# --- which primitives hold jaxprs ---------------------------------------------------------
def _custom_jvp_sin():
    f = plax.custom_jvp(jnp.sin)
    f.defjvp(lambda p, t: (jnp.sin(p[0]), jnp.cos(p[0]) * t[0]))
    return f


def _custom_vjp_sin():
    f = plax.custom_vjp(jnp.sin)
    f.defvjp(lambda x: (jnp.sin(x), x), lambda x, ct: (jnp.cos(x) * ct,))
    return f


def _shard_map_psum(x):
    mesh = plax.sharding.Mesh(np.array(plax.devices()), ("i",))
    spec = plax.sharding.PartitionSpec("i")
    return plax.shard_map(lambda v: v * lax.psum(v, "i"), mesh=mesh, in_specs=spec,
                          out_specs=spec)(x)


_ALL = ("trace", "jvp", "vmap", "grad")
# A tiny use of every public API that builds a higher-order primitive, as a function of one
# float vector, with the transformations it supports (while_loop has no reverse mode, a
# custom_vjp function no forward mode).
_HOP_PROGRAMS = [
    (lambda x: lax.cond(x[0] > 0, jnp.sin, jnp.cos, x), _ALL),
    (lambda x: lax.switch(1, [jnp.sin, jnp.cos], x), _ALL),
    (lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.sin(c[1])),
                              (0, x))[1], ("trace", "jvp", "vmap")),
    (lambda x: lax.fori_loop(0, 2, lambda i, c: jnp.sin(c), x), _ALL),
    (lambda x: lax.scan(lambda c, xi: (c + jnp.sin(xi), c), 0.0, x)[1], _ALL),
    (lambda x: lax.map(jnp.sin, x), _ALL),
    (plax.jit(jnp.sin), _ALL),
    (plax.checkpoint(jnp.sin), _ALL),
    (_custom_jvp_sin(), _ALL),
    (_custom_vjp_sin(), ("trace", "vmap", "grad")),
    (_shard_map_psum, _ALL),
    (lambda x: lax.reduce(x, np.float32(0), lambda a, b: a + b * b, (0,)), _ALL),
    (lambda x: lax.reduce_window(x, np.float32(0), lambda a, b: a + b * b, (2,), (1,),
                                 "VALID"), _ALL),
]


def _transformed(fn, how):
    if how == "trace":
        return fn
    if how == "jvp":
        return lambda x: plax.jvp(fn, (x,), (x,))
    if how == "vmap":
        return lambda x: plax.vmap(fn)(jnp.stack([x, 2 * x]))
    return plax.grad(lambda x: jnp.sum(fn(x)))


def _collect_holders(jaxpr, found: set):
    for eqn in jaxpr.eqns:
        for sub in subjaxprs(eqn.params):
            found.add(eqn.primitive)
            _collect_holders(open_jaxpr(sub), found)


def _primitives_holding_jaxprs() -> set:
    """The primitives whose equations hold jaxprs, at any depth of the jaxprs of the
    programs above and their transformations (tracing only: nothing is compiled)."""
    x = np.linspace(0.1, 0.8, 2 * len(plax.devices())).astype(np.float32)
    found = set()
    for fn, transformations in _HOP_PROGRAMS:
        for how in transformations:
            _collect_holders(plax.make_jaxpr(_transformed(fn, how))(x).jaxpr, found)
    return found


JAXPR_HOLDERS = _primitives_holding_jaxprs()


def _required(prim, kind) -> bool:
    if kind == "transpose":
        return prim in rules.linear_primitives
    if kind in ("partial_eval", "dce"):
        return prim in JAXPR_HOLDERS
    return True


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
    if kind == "partial_eval":
        return prim in rules.partial_eval_rules
    if kind == "dce":
        return prim in rules.dce_rules
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
        f"exemption ({name!r}, {kind!r}): the rule is not required ({name!r} is not linear, "
        f"or holds no jaxprs)")
    assert not _has_rule(prim, kind), (
        f"{name!r} now has a {kind} rule: remove its exemption from EXEMPTIONS")
    reason, issue = EXEMPTIONS[(name, kind)]
    assert reason and issue


def test_discovery_finds_the_primitives_of_every_family():
    """Guards the scan itself: if it found nothing, every coverage test would vanish."""
    for name in ("add", "sin", "convert_element_type", "broadcast_in_dim", "iota",
                 "reduce_sum", "cumsum", "reduce", "sort", "gather", "scatter-add",
                 "dot_general", "jit", "checkpoint", "psum", "axis_index",
                 "custom_jvp_call", "custom_vjp_call"):
        assert name in BY_NAME, f"the scan of plax modules did not find primitive {name!r}"


def test_discovery_finds_every_primitive_holding_jaxprs():
    """Guards the tracing of _HOP_PROGRAMS: each of these must be seen holding a jaxpr."""
    found = {p.name for p in JAXPR_HOLDERS}
    for name in ("cond", "while", "scan", "jit", "checkpoint", "custom_jvp_call",
                 "custom_vjp_call", "shard_map", "reduce", "reduce_window"):
        assert name in found, f"no traced program showed primitive {name!r} holding a jaxpr"
    assert all(p in OWNERS for p in JAXPR_HOLDERS), "a jaxpr holder no plax module defines"


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
