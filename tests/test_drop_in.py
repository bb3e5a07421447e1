"""JAX programs run on plax unchanged: `python -m plax`, install_as_jax, and the alias's robustness.

Every test here starts a fresh interpreter, because the alias (and jaxlib's
one-time lookup of ``jax.core``) are per process.
"""
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(args, tmp_path, pythonpath=(), timeout=120):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), os.path.join(REPO, "src")])
    env.setdefault("PLAX_NUM_CPU_DEVICES", "8")
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=timeout)


def run_script(tmp_path, body, via="-m plax", pythonpath=()):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(body))
    args = ["-m", "plax", str(script)] if via == "-m plax" else [str(script)]
    return run_python(args, tmp_path, pythonpath)


def assert_ok(proc, *expected_lines):
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    for want in expected_lines:
        assert want in lines, (want, proc.stdout[-2000:])


def fake_real_jax(tmp_path):
    """A folder holding a package named ``jax`` that stands for a real JAX elsewhere on the path.

    Importing it records the fact in the environment variable-free way: it
    writes a marker file next to itself, so a test can tell it was imported.
    """
    root = tmp_path / "site"
    pkg = root / "jax"
    pkg.mkdir(parents=True)
    marker = tmp_path / "real_jax_imported"
    (pkg / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').write('yes')\n__version__ = '99.0'\n")
    (pkg / "core.py").write_text(
        f"open({str(marker)!r}, 'w').write('core')\nclass ShapedArray:\n"
        "    def __init__(self, *a, **k): raise RuntimeError('real jax.core used')\n")
    return root, marker


TRAINING = """
    import numpy as np
    import jax
    import jax.numpy as jnp
    from jax import tree_util

    def loss(params, x, y):
        pred = jnp.tanh(x @ params["w"] + params["b"])
        return jnp.mean((pred - y) ** 2)

    @jax.jit
    def step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return tree_util.tree_map(lambda p, g: p - 0.5 * g, params, grads), value

    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 3)).astype(np.float32)
    w_true = np.array([[0.5], [-0.3], [0.2]], np.float32)
    y = np.tanh(x @ w_true)
    params = {"w": jnp.zeros((3, 1)), "b": jnp.zeros(1)}
    for _ in range(200):
        params, value = step(params, x, y)
    w = np.asarray(params["w"])
    print("close", bool(np.allclose(w, w_true, atol=0.05)), type(w).__name__)
    print("loss_small", float(value) < 1e-3)
    # the gradient agrees with a central difference, read back to NumPy
    g = np.asarray(jax.grad(loss)(params, x, y)["b"])
    eps = 1e-3
    fd = (float(loss({"w": params["w"], "b": params["b"] + eps}, x, y))
          - float(loss({"w": params["w"], "b": params["b"] - eps}, x, y))) / (2 * eps)
    print("grad_fd", bool(abs(g[0] - fd) < 1e-3))
"""

VMAP_PYTREES = """
    import numpy as np
    import jax
    import jax.numpy as jnp
    from jax.tree_util import tree_map, tree_structure, register_pytree_node_class

    @register_pytree_node_class
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b
        def tree_flatten(self):
            return (self.a, self.b), None
        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    xs = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    out = jax.vmap(lambda p: p.a * jnp.sum(p.b))(Pair(xs, xs + 1))
    want = xs * (xs + 1).sum(axis=1, keepdims=True)
    print("vmap", bool(np.allclose(np.asarray(out), want)))
    jac = np.asarray(jax.jacrev(lambda v: jnp.sin(v) * v)(xs[0]))
    print("jacrev", bool(np.allclose(jac, np.diag(np.cos(xs[0]) * xs[0] + np.sin(xs[0])), atol=1e-5)))
    doubled = tree_map(lambda v: v * 2, {"k": (jnp.ones(2), [jnp.arange(3)])})
    print("tree", np.asarray(doubled["k"][1][0]).tolist() == [0, 2, 4])
    print("bf16", np.asarray(jnp.ones(3, jnp.bfloat16) * 3).astype(np.float32).tolist() == [3.0] * 3)
    print("int4", np.asarray(jnp.arange(4).astype(jnp.int4)).astype(int).tolist() == [0, 1, 2, 3])
"""

DEVICES = """
    import numpy as np
    import jax
    import jax.numpy as jnp

    devs = jax.devices()
    print("ndev", len(devs))
    x = jax.device_put(np.arange(6.0, dtype=np.float32), devs[3])
    print("put", np.asarray(x).tolist() == [0, 1, 2, 3, 4, 5], x.devices() == {devs[3]})
    shards = x.addressable_shards
    print("shards", len(shards), np.asarray(shards[0].data).tolist() == [0, 1, 2, 3, 4, 5])
    y = jax.jit(lambda a: a * 2)(x)
    print("jit_on_dev", np.asarray(y)[-1] == 10.0, y.devices() == {devs[3]})
    donate = jax.jit(lambda a: a + 1, donate_argnums=0)
    z = donate(jnp.ones(4))
    print("donated", np.asarray(z).tolist() == [2.0] * 4)
    print("get", jax.device_get({"a": z})["a"].tolist() == [2.0] * 4)
"""


PUBLIC_MODULES = """
    import jax, jax.errors, jax.typing, jax.dtypes, jax.core, jax.flatten_util, jax.stages
    import jax.test_util, jax.ad_checkpoint, jax.tree_util, jax.numpy as jnp
    from jax import typing, lax
    from jax.core import ShapedArray, Tracer, ClosedJaxpr
    from jax.typing import ArrayLike, DTypeLike
    from jax.flatten_util import ravel_pytree
    from jax.errors import ConcretizationTypeError
    print("version", jax.__version_info__ >= (0, 4, 0), jax.__version__.startswith("0.10."))
    print("modules", jax.core.ShapedArray is ShapedArray, jax.errors is jax.errors)
    flat, unravel = ravel_pytree({"a": jnp.ones(2), "b": jnp.zeros(())})
    print("ravel", flat.tolist(), unravel(flat)["a"].tolist())
    def f(x: ArrayLike):
        print("tracer", isinstance(x, Tracer), isinstance(x, jax.Array))
        return x * 2
    jax.jit(f)(1.0)
    print("aval", jax.typeof(jnp.ones(3)) == ShapedArray((3,), jnp.float32))
    try:
        jax.jit(lambda x: float(x))(1.0)
    except ConcretizationTypeError:
        print("caught ConcretizationTypeError")
"""


def test_public_modules_import_through_the_alias(tmp_path):
    assert_ok(run_script(tmp_path, PUBLIC_MODULES), "version True True", "modules True True",
              "ravel [1.0, 1.0, 0.0] [1.0, 1.0]", "tracer True True", "aval True",
              "caught ConcretizationTypeError")


def test_training_step_runs_through_python_m_plax(tmp_path):
    assert_ok(run_script(tmp_path, TRAINING), "close True ndarray", "loss_small True",
              "grad_fd True")


def test_vmap_pytrees_and_dtypes_read_back(tmp_path):
    assert_ok(run_script(tmp_path, VMAP_PYTREES), "vmap True", "jacrev True", "tree True",
              "bf16 True", "int4 True")


def test_device_put_jit_and_donation_read_back(tmp_path):
    assert_ok(run_script(tmp_path, DEVICES), "ndev 8", "put True True", "shards 1 True",
              "jit_on_dev True True", "donated True", "get True")


def test_install_as_jax_from_python(tmp_path):
    body = """
        import plax
        plax.install_as_jax()
        import jax, jax.numpy as jnp, jax.lax
        from jax import errors, typing, tree_util
        import numpy as np
        print("same", jax is plax, jax.numpy is plax.numpy, jax.lax is plax.lax)
        print("value", np.asarray(jax.jit(lambda x: jnp.cumsum(x))(jnp.arange(4.0))).tolist())
        plax.install_as_jax()   # twice is harmless
        print("errors", errors.ConcretizationTypeError is plax.errors.ConcretizationTypeError)
    """
    assert_ok(run_script(tmp_path, body, via="python"), "same True True True",
              "value [0.0, 1.0, 3.0, 6.0]", "errors True")


def test_alias_wins_over_a_real_jax_on_the_path(tmp_path):
    site, marker = fake_real_jax(tmp_path)
    proc = run_script(tmp_path, TRAINING, pythonpath=[site])
    assert_ok(proc, "close True ndarray", "loss_small True")
    assert not marker.exists()


def test_plain_plax_never_imports_a_real_jax(tmp_path):
    """Without the alias, reading results must not make jaxlib import whatever `jax` is."""
    site, marker = fake_real_jax(tmp_path)
    body = """
        import numpy as np
        import plax, plax.numpy as jnp
        x = plax.jit(lambda a: a * 3)(jnp.arange(3.0))
        print("read", np.asarray(x).tolist(), np.asarray(jnp.ones(2, jnp.bfloat16)).dtype)
        print("shard", np.asarray(x.addressable_shards[0].data).tolist())
        import sys
        print("jax_loaded", "jax" in sys.modules)
    """
    assert_ok(run_script(tmp_path, body, via="python", pythonpath=[site]),
              "read [0.0, 3.0, 6.0] bfloat16", "shard [0.0, 3.0, 6.0]", "jax_loaded False")
    assert not marker.exists()


def test_jaxlib_lookup_of_jax_core_is_answered_by_plax(tmp_path):
    """A `jax.core` installed after plax started (here: one that raises) is never consulted."""
    body = """
        import sys, types
        import numpy as np
        import plax, plax.numpy as jnp
        jnp.zeros(1).block_until_ready()          # the backend is up: the lookup is done
        class Hostile(types.ModuleType):
            def __getattr__(self, name):
                raise RuntimeError("jaxlib asked jax.core for " + name)
        sys.modules["jax"] = types.ModuleType("jax")
        sys.modules["jax.core"] = Hostile("jax.core")
        for dt in (jnp.float32, jnp.int8, jnp.bfloat16, jnp.complex64):
            print(dt.__name__ if hasattr(dt, "__name__") else dt,
                  np.asarray(plax.jit(lambda a: a + 1)(jnp.ones((2, 2), dt))).tolist())
    """
    proc = run_script(tmp_path, body, via="python")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["float32", "[[2.0,", "2.0],", "[2.0,", "2.0]]", "int8", "[[2,",
                                   "2],", "[2,", "2]]", "bfloat16", "[[2.0,", "2.0],", "[2.0,",
                                   "2.0]]", "complex64", "[[(2+0j),", "(2+0j)],", "[(2+0j),",
                                   "(2+0j)]]"], proc.stdout


def test_install_refuses_when_real_jax_already_imported(tmp_path):
    site, _ = fake_real_jax(tmp_path)
    body = """
        import jax
        import plax
        try:
            plax.install_as_jax()
        except RuntimeError as e:
            print("refused:", "already imported" in str(e))
        import jax as again
        print("untouched", again.__version__)
    """
    assert_ok(run_script(tmp_path, body, via="python", pythonpath=[site]), "refused: True",
              "untouched 99.0")


def test_python_m_plax_refuses_when_real_jax_already_imported(tmp_path):
    site, _ = fake_real_jax(tmp_path)
    (tmp_path / "prog.py").write_text("print('ran')\n")
    code = ("import jax, runpy, sys; sys.argv = ['plax', 'prog.py']; "
            "runpy.run_module('plax', run_name='__main__', alter_sys=True)")
    proc = run_python(["-c", code], tmp_path, pythonpath=[site])
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "already imported" in proc.stderr and "ran" not in proc.stdout


def test_python_m_plax_version_help_and_arguments(tmp_path):
    version = run_python(["-m", "plax", "--version"], tmp_path)
    assert version.returncode == 0 and "mirrors the JAX 0.10" in version.stdout
    helptext = run_python(["-m", "plax", "--help"], tmp_path)
    assert helptext.returncode == 0 and "python -m plax SCRIPT" in helptext.stdout
    body = """
        import sys, jax
        print("argv", sys.argv[1:], sys.argv[0].endswith("prog.py"))
        print("name", __name__)
        sys.exit(3)
    """
    (tmp_path / "prog.py").write_text(textwrap.dedent(body))
    proc = run_python(["-m", "plax", "prog.py", "--lr", "0.1"], tmp_path)
    assert proc.returncode == 3
    assert "argv ['--lr', '0.1'] True" in proc.stdout and "name __main__" in proc.stdout
    missing = run_python(["-m", "plax", "nope.py"], tmp_path)
    assert missing.returncode == 2 and "can't open file" in missing.stderr
    code = run_python(["-m", "plax", "-c", "import jax; print(jax.__name__, jax.__version__)"],
                      tmp_path)
    assert code.stdout.strip() == "plax 0.10.2", code.stderr


def test_missing_jax_submodule_does_not_fall_through_to_a_real_jax(tmp_path):
    site, marker = fake_real_jax(tmp_path)
    body = """
        try:
            import jax.no_such_module
        except ModuleNotFoundError as e:
            print("missing", e.name, "plax has no" in str(e))
    """
    assert_ok(run_script(tmp_path, body, pythonpath=[site]), "missing jax.no_such_module True")
    assert not marker.exists()


@pytest.mark.parametrize("files", [["tests/test_jit.py", "tests/test_autodiff.py",
                                    "tests/test_vmap.py"]])
def test_core_suites_pass_through_the_alias(files):
    """plax's own jit, autodiff and vmap tests, once more with `jax` resolving to plax."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"))
    env.setdefault("PLAX_NUM_CPU_DEVICES", "8")
    proc = subprocess.run([sys.executable, "-m", "plax", "-m", "pytest", "-q", "-x",
                           "-p", "no:cacheprovider", *files], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout
