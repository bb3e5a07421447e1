"""What ``import plax, plax.numpy`` loads: the core, lax and numpy, not the submodules a program
may never use, no SciPy, opt_einsum or ml_dtypes, and no XLA client; the lazy names still resolve.

The checks that look at ``sys.modules`` run in a fresh interpreter.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import plax

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAZY_SUBMODULES = ["scipy", "random", "nn", "experimental", "debug", "stages", "test_util",
                   "ad_checkpoint", "flatten_util", "drop_in"]
LAZY_NAMES = ["shard_map", "pmap", "pure_callback", "custom_gradient", "install_as_jax"]


def run_fresh(code, *args):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"))
    env.setdefault("PLAX_NUM_CPU_DEVICES", "8")
    proc = subprocess.run([sys.executable, *args, "-c", textwrap.dedent(code)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_import_loads_neither_the_optional_submodules_nor_a_backend():
    out = run_fresh("""
        import json, sys
        import jaxlib.xla_client as xc
        made = []
        real = xc.make_cpu_client
        xc.make_cpu_client = lambda *a, **k: made.append(1) or real(*a, **k)
        import plax, plax.numpy
        from plax.runtime import xla
        subs = %r
        print(json.dumps({
            "loaded": [s for s in subs if "plax." + s in sys.modules],
            "third_party": [m for m in ("scipy", "opt_einsum", "ml_dtypes")
                            if m in sys.modules],
            "linalg_fft": [m for m in ("plax.numpy.linalg", "plax.numpy.fft", "plax.lax.linalg")
                           if m in sys.modules],
            "clients_made": len(made), "backends": list(xla._backends),
        }))
        """ % LAZY_SUBMODULES)
    assert out == {"loaded": [], "third_party": [], "linalg_fft": [], "clients_made": 0,
                   "backends": []}


def test_lazy_submodules_and_names_work_after_a_bare_import():
    out = run_fresh("""
        import json, sys
        import plax, plax.numpy as jnp
        from plax import random
        key = plax.random.PRNGKey(0)
        relu = plax.nn.relu(jnp.array([-1.0, 2.0]))
        gammaln = plax.scipy.special.gammaln(jnp.array([3.0]))
        inv = jnp.linalg.inv(jnp.array([[2.0, 0.0], [0.0, 4.0]]))
        fft = jnp.fft.fft(jnp.ones(4))
        print(json.dumps({
            "same_random": random is plax.random is sys.modules["plax.random"],
            "key": [int(v) for v in key],
            "relu": relu.tolist(), "gammaln": float(gammaln[0]),
            "inv": inv.tolist(), "fft0": float(fft[0].real),
            "io_callback": plax.experimental.io_callback.__module__,
            "names": {n: getattr(plax, n).__module__ for n in %r},
            "qr": plax.lax.linalg.qr.__name__,
        }))
        """ % LAZY_NAMES)
    assert out["same_random"] and out["key"] == [0, 0]
    assert out["relu"] == [0.0, 2.0]
    assert out["gammaln"] == pytest.approx(0.6931472, rel=1e-6)  # log(2!)
    assert out["inv"] == [[0.5, 0.0], [0.0, 0.25]] and out["fft0"] == 4.0
    assert out["io_callback"] == "plax.api.callbacks"
    assert out["names"] == {"shard_map": "plax.api.shard_map", "pmap": "plax.api.pmap",
                            "pure_callback": "plax.api.callbacks",
                            "custom_gradient": "plax.higher_order.custom_gradient",
                            "install_as_jax": "plax.drop_in"}
    assert out["qr"] == "qr"


def test_import_defers_the_rarely_used_families_and_the_key_reuse_checker():
    out = run_fresh("""
        import json, sys
        import plax, plax.numpy as jnp
        deferred = [*plax.lax._LAZY_FAMILIES, *plax.lax._LAZY_SUBMODULES.values(),
                    *jnp._LAZY_FAMILIES, "plax.interpreters.key_reuse",
                    "plax.runtime.compile_cache", "hashlib"]
        loaded = [m for m in deferred if m in sys.modules]
        y = plax.lax.cond(True, lambda x: x + 1, lambda x: x - 1, 1.0)
        closed = plax.make_jaxpr(lambda x: plax.lax.cond(x > 0, jnp.sin, jnp.cos, x))(1.0)
        from plax.lax import fori_loop, top_k
        print(json.dumps({
            "loaded": loaded, "cond": float(y), "printed": "cond[" in str(closed),
            "fori_loop": float(fori_loop(0, 3, lambda i, c: c * 2.0, 1.0)),
            "top_k": top_k(jnp.array([3.0, 1.0, 5.0]), 2)[0].tolist(),
            "polyval": float(jnp.polyval(jnp.array([1.0, 2.0]), 3.0)),
            "families_loaded": sorted(m for m in plax.lax._LAZY_FAMILIES if m in sys.modules),
        }))
        """)
    assert out["loaded"] == []
    assert out["cond"] == 2.0 and out["printed"] and out["fori_loop"] == 8.0
    assert out["top_k"] == [5.0, 3.0] and out["polyval"] == 5.0
    # Each family loads alone (fori_loop runs as a scan): the others stay unloaded.
    assert out["families_loaded"] == ["plax.first_order.sort", "plax.higher_order.cond",
                                      "plax.higher_order.loops", "plax.higher_order.scan"]


ML_DTYPES_AFTER_IMPORT = [
    # (what a program does first, the JSON-able result it must print)
    ("jnp.zeros(2, 'bfloat16').dtype.name", "bfloat16"),
    ("jnp.ones(2).astype('float8_e4m3fn').dtype.name", "float8_e4m3fn"),
    ("str(jnp.bfloat16(1.5).dtype)", "bfloat16"),
    ("float(jnp.finfo('bfloat16').eps)", 0.0078125),
    ("int(jnp.iinfo('int4').max)", 7),
    ("plax.dtypes.bfloat16.__name__", "bfloat16"),
    ("str(jnp.promote_types(jnp.bfloat16, jnp.float16))", "float32"),
    ("plax.dtypes.itemsize_bits('int4')", 4),
    ("[jnp.dtype('bfloat16').name, jnp.dtype is np.dtype]", ["bfloat16", True]),
    # ml_dtypes imported by the user, never named through plax: its values still work.
    ("jnp.asarray(np.ones(2, __import__('ml_dtypes').bfloat16)).sum().dtype.name", "bfloat16"),
    ("str((jnp.ones(2) + np.ones(2, __import__('ml_dtypes').bfloat16)).dtype)", "float32"),
    ("str(jnp.result_type(np.dtype(__import__('ml_dtypes').int4), 1))", "int4"),
]


@pytest.mark.parametrize("first, expected", ML_DTYPES_AFTER_IMPORT)
def test_ml_dtypes_load_on_first_need(first, expected):
    # Each in a fresh interpreter, where the float32 promotion lattice was built (and
    # cached) before ml_dtypes' types were known.
    out = run_fresh("""
        import json, sys
        import numpy as np
        import plax, plax.numpy as jnp
        before = "ml_dtypes" in sys.modules
        lattice = str(jnp.result_type(jnp.float32, jnp.int8, 1.0))
        print(json.dumps([before, lattice, %s]))
        """ % first)
    assert out == [False, "float32", expected]


def test_ml_dtypes_names_are_unchanged():
    import ml_dtypes
    star = {}
    exec("from plax.numpy import *", star)
    for name in plax.core.dtypes.ML_DTYPE_NAMES | plax.core.dtypes.ML_SCALAR_ONLY_NAMES:
        assert np.dtype(getattr(plax.numpy, name)) == np.dtype(getattr(ml_dtypes, name)), name
        assert star[name] is getattr(plax.numpy, name) and name in dir(plax.numpy), name
    assert plax.dtypes.bfloat16 is ml_dtypes.bfloat16 is plax.core.dtypes.bfloat16
    with pytest.raises(AttributeError, match="has no attribute 'float8_e9'"):
        plax.core.dtypes.float8_e9  # noqa: B018


@pytest.mark.parametrize("face", [plax.lax, plax.numpy])
def test_lazy_families_give_their_names(face):
    import importlib
    names, star = dir(face), {}
    exec(f"from {face.__name__} import *", star)
    for module, lazy in face._LAZY_FAMILIES.items():
        family = importlib.import_module(module)
        assert set(getattr(family, "__all__", lazy)) <= set(lazy), module  # none forgotten
        for name in lazy:
            assert getattr(face, name) is getattr(family, name) is star[name], name
            assert name in names, name


def test_lax_prng_is_the_typed_key_primitives_module():
    import importlib
    assert plax.lax.prng is importlib.import_module("plax.first_order.prng")


def test_dir_lists_the_lazy_names():
    names = dir(plax)
    for name in LAZY_SUBMODULES + LAZY_NAMES + ["numpy", "lax", "jit", "grad"]:
        assert name in names, name
    assert {"linalg", "fft"} <= set(dir(plax.numpy))
    assert "linalg" in dir(plax.lax)


@pytest.mark.parametrize("module", [plax, plax.numpy, plax.lax])
def test_unknown_attribute_is_an_attribute_error(module):
    with pytest.raises(AttributeError, match=f"module '{module.__name__}' has no attribute 'nope'"):
        module.nope  # noqa: B018


def test_drop_in_aliases_lazy_submodules():
    # A JAX program, kept as data (.jaxpy, as in tests/test_drop_in.py): it runs only under
    # `python -m plax`.
    with open(os.path.join(REPO, "tests", "jax_programs", "lazy_submodules.jaxpy")) as f:
        out = run_fresh(f.read(), "-m", "plax")
    assert out == {"random": True, "io_callback": True, "scipy_linalg": True,
                   "initializers": True, "linalg": True, "uniform": True}
