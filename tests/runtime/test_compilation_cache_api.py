"""plax.experimental.compilation_cache: set_cache_dir / reset_cache on the persistent cache."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental.compilation_cache import compilation_cache as cc
from plax.runtime import compile_cache

# Run in a fresh process: choose the directory, compile and run one program, report.
SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import plax, plax.numpy as jnp
    from plax.experimental.compilation_cache import compilation_cache as cc
    from plax.runtime import compile_cache
    cc.set_cache_dir(sys.argv[1])
    out = plax.jit(lambda x: jnp.tanh(x) @ x.T + {k})(np.ones((3, 3), np.float32) / 2)
    print(json.dumps({{"stats": compile_cache.stats, "out": np.asarray(out).tolist()}}))
    """)


def _run(directory, k=7.0):
    env = dict(os.environ)
    env.pop("PLAX_CACHE_DIR", None)  # the directory comes from set_cache_dir alone
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(k=k), str(directory)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_fresh_process_finds_what_an_earlier_one_wrote(tmp_path):
    directory = tmp_path / "cache"
    want = np.tanh(np.full((3, 3), 0.5)) @ np.full((3, 3), 0.5) + 7.0
    first = _run(directory)
    entries = sorted(p.name for p in directory.iterdir())
    assert first["stats"]["hits"] == 0 and first["stats"]["writes"] >= 1
    assert len(entries) == first["stats"]["writes"] and all(e.endswith(".xlaexe") for e in entries)
    second = _run(directory)
    assert second["stats"]["misses"] == 0 and second["stats"]["hits"] == first["stats"]["writes"]
    assert sorted(p.name for p in directory.iterdir()) == entries  # nothing new written
    np.testing.assert_allclose(first["out"], want, rtol=1e-6)
    np.testing.assert_allclose(second["out"], want, rtol=1e-6)
    other = _run(directory, k=8.0)  # another program: compiled and added
    assert other["stats"]["misses"] >= 1 and len(list(directory.iterdir())) > len(entries)


def test_set_cache_dir_and_reset_cache_in_this_process(tmp_path):
    saved = plax.config.read("compilation_cache_dir")
    try:
        cc.set_cache_dir(tmp_path)
        assert plax.config.read("compilation_cache_dir") == str(tmp_path)
        assert compile_cache.cache_dir() == str(tmp_path)
        before = dict(compile_cache.stats)
        value = plax.jit(lambda x: jnp.cosh(x) * 3.25 - 1)(np.arange(4.0, dtype=np.float32))
        np.testing.assert_allclose(value, np.cosh(np.arange(4.0)) * 3.25 - 1, rtol=1e-6)
        assert compile_cache.stats["writes"] > before["writes"]
        assert any(p.suffix == ".xlaexe" for p in tmp_path.iterdir())
        assert str(tmp_path) in compile_cache._estimates  # the size it has written there
        cc.reset_cache()
        assert compile_cache._estimates == {}  # forgotten; the entries stay on disk
        assert any(p.suffix == ".xlaexe" for p in tmp_path.iterdir())
    finally:
        plax.config.update("jax_compilation_cache_dir", saved)
        cc.reset_cache()


def test_the_module_lists_jaxs_names():
    assert sorted(n for n in dir(cc) if not n.startswith("_") and callable(getattr(cc, n))
                  and getattr(cc, n).__module__ == cc.__name__) == ["reset_cache",
                                                                    "set_cache_dir"]
    with pytest.raises(TypeError, match="expected str, bytes or os.PathLike"):
        cc.set_cache_dir(3)
