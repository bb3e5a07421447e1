"""A primitive written the JAX way (``jax.extend.core.Primitive`` with rules registered through
``jax.interpreters.ad``/``batching``/``mlir``, the lowering built with jaxlib's ``hlo.*``
ops) works under every plax transformation, and its rules land in plax's tables."""
import os
import subprocess
import sys

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core import rules
from plax.core.avals import ShapedArray
from plax.extend.core import Primitive
from plax.interpreters import ad, batching, mlir
from plax.sharding import Mesh, PartitionSpec as P
from plax.test_util import check_grads

# my_sin(x) = sin(x); scale(t, c) = t * c, bilinear (its transpose gives the cotangent).
my_sin_p = Primitive("my_sin")
scale_p = Primitive("scale")


def my_sin(x):
    return my_sin_p.bind(x)


def _same(x, *rest):
    return ShapedArray(x.shape, x.dtype)


my_sin_p.def_impl(lambda x: np.sin(x))
my_sin_p.def_abstract_eval(_same)
scale_p.def_abstract_eval(_same)


def _my_sin_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return my_sin(x), scale_p.bind(ad.instantiate_zeros(t), jnp.cos(x))


ad.primitive_jvps[my_sin_p] = _my_sin_jvp
ad.defbilinear(scale_p, lambda ct, t, c: scale_p.bind(ct, c),
               lambda ct, t, c: scale_p.bind(t, ct))
batching.primitive_batchers[my_sin_p] = lambda args, dims: (my_sin(args[0]), dims[0])
batching.fancy_primitive_batchers[scale_p] = lambda axis, vals, dims: (
    scale_p.bind(*[batching.bdim_at_front(v, d, axis.size) for v, d in zip(vals, dims)]), 0)
mlir.register_lowering(my_sin_p, lambda ctx, x: [mlir.hlo.sine(x)])
mlir.register_lowering(scale_p, lambda ctx, t, c: [mlir.hlo.multiply(t, c)])

# JAX programs are kept as data (tests/jax_programs/*.jaxpy): no test file imports jax itself.
PROGRAMS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jax_programs")


def jax_program(name: str) -> str:
    with open(os.path.join(PROGRAMS, name + ".jaxpy")) as f:
        return f.read()


X = np.linspace(-1.0, 2.0, 8).astype(np.float32)


def test_rules_land_in_plax_tables():
    assert rules.jvp_rules[my_sin_p] is _my_sin_jvp
    assert scale_p in rules.transpose_rules and my_sin_p in rules.batch_rules
    assert my_sin_p in rules.lowering_rules and scale_p.multiple_results is False


@pytest.mark.parametrize("transform, reference", [
    (lambda f: f, np.sin),
    (plax.jit, np.sin),
    (lambda f: plax.jit(plax.vmap(f)), np.sin),
    (lambda f: plax.grad(lambda x: f(x).sum()), np.cos),
    (lambda f: plax.jit(plax.grad(lambda x: f(x).sum())), np.cos),
    (lambda f: plax.vmap(plax.grad(lambda x: f(x))), np.cos),
    (lambda f: plax.grad(lambda x: plax.grad(lambda y: f(y).sum())(x).sum()),
     lambda x: -np.sin(x)),
])
def test_values_under_transformations(transform, reference):
    np.testing.assert_allclose(transform(my_sin)(X), reference(X), rtol=1e-5, atol=1e-6)


def test_numerical_derivatives():
    check_grads(lambda x: my_sin(x) * x, (X,), order=2, modes=("fwd", "rev"))


def test_under_scan_and_linearize():
    def body(c, x):
        return c + my_sin(x), my_sin(c)
    c, ys = plax.jit(lambda xs: lax.scan(body, np.float32(0), xs))(X)
    want_c = np.cumsum(np.sin(X))
    np.testing.assert_allclose(c, want_c[-1], rtol=1e-5)
    np.testing.assert_allclose(ys, np.sin(np.concatenate([[0], want_c[:-1]])), rtol=1e-5,
                               atol=1e-6)
    y, f_jvp = plax.linearize(my_sin, X)
    np.testing.assert_allclose(f_jvp(np.ones_like(X)), np.cos(X), rtol=1e-5)


def test_under_shard_map():
    mesh = Mesh(np.array(plax.devices()[:8]), ("i",))
    f = plax.jit(plax.shard_map(lambda x: my_sin(x) * 2, mesh=mesh, in_specs=P("i"),
                                out_specs=P("i")))
    np.testing.assert_allclose(f(X), 2 * np.sin(X), rtol=1e-5)


def test_bindings_rule_splices_one_function_per_use_kind():
    text = plax.jit(lambda x: my_sin(x) + my_sin(x * 2)).lower(X).as_text()
    assert text.count("func.func private @my_sin_lowering") == 1
    assert text.count("callee = @my_sin_lowering") == 2


def test_lower_fun_rule_and_lower_fun_inside_a_bindings_rule():
    cube_p = Primitive("cube_via_lower_fun")
    cube_p.def_abstract_eval(_same)
    mlir.register_lowering(cube_p, mlir.lower_fun(lambda x: x * x * x, multiple_results=False))
    twice_p = Primitive("twice_sin_plus_one")
    twice_p.def_abstract_eval(_same)

    def twice_rule(ctx, x):
        s, = mlir.lower_fun(lambda v: [jnp.sin(v) + 1.0], multiple_results=True)(ctx, x)
        return [mlir.hlo.add(s, s)]
    mlir.register_lowering(twice_p, twice_rule)
    try:
        np.testing.assert_allclose(plax.jit(cube_p.bind)(X), X ** 3, rtol=1e-5)
        np.testing.assert_allclose(plax.jit(twice_p.bind)(X), 2 * (np.sin(X) + 1), rtol=1e-5)
    finally:
        for p in (cube_p, twice_p):
            rules.all_primitives.remove(p)


def test_wrong_result_type_from_a_bindings_rule_is_named():
    bad_p = Primitive("bad_lowering")
    bad_p.def_abstract_eval(lambda x: ShapedArray(x.shape, np.float32))
    mlir.register_lowering(bad_p, lambda ctx, x: [mlir.hlo.convert(
        mlir.ir.RankedTensorType.get(x.type.shape, mlir.ir.F64Type.get()), x)])
    try:
        with pytest.raises(TypeError, match="lowering rule of bad_lowering returned values of types"):
            plax.jit(bad_p.bind).lower(X)
    finally:
        rules.all_primitives.remove(bad_p)


def test_extension_api_with_jax_resolving_to_plax(tmp_path):
    program = jax_program("user_primitive_extension_api")  # JAX code: runs only as jax -> plax
    (tmp_path / "prog.py").write_text(program)
    env = dict(os.environ, PLAX_NUM_CPU_DEVICES="1")
    out = subprocess.run([sys.executable, "-m", "plax", "prog.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["56.0", "[0.0,", "8.0,", "16.0,", "24.0]",
                                  "[[0.0,", "2.0,", "4.0,", "6.0]]"]


@pytest.mark.parametrize("table", ["jvp", "fancy", "plain", "axis"])
def test_rules_get_operands_and_dims_as_tuples(table):
    # As JAX's: a rule may use them as a pytree's structure (vmap's in_axes for the operands).
    seen = []
    p = Primitive(f"add_{table}")
    p.def_impl(lambda x, y: x + y)
    p.def_abstract_eval(_same)

    def through_vmap(vals, dims):
        seen.append((type(vals), type(dims)))
        return plax.vmap(lambda x, y: x + y, in_axes=dims)(*vals), 0

    if table == "jvp":
        def jvp(primals, tangents):
            seen.append((type(primals), type(tangents)))
            return p.bind(*primals), sum(ad.instantiate_zeros(t) for t in tangents)
        ad.primitive_jvps[p] = jvp
        out = plax.jvp(lambda x: p.bind(x, x), (X,), (X,))
    elif table == "fancy":
        batching.fancy_primitive_batchers[p] = lambda axis, vals, dims: through_vmap(vals, dims)
    elif table == "plain":
        batching.primitive_batchers[p] = through_vmap
    else:
        batching.axis_primitive_batchers[p] = lambda size, name, _, vals, dims: \
            through_vmap(vals, dims)
    if table != "jvp":
        out = plax.vmap(p.bind, in_axes=(0, None))(X[:4], X[0])
    assert seen[0] == (tuple, tuple)
    np.testing.assert_allclose(out[-1] if table == "jvp" else out,
                               2 * X if table == "jvp" else X[:4] + X[0], rtol=1e-6)
