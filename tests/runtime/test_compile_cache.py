"""The persistent compilation cache: reuse across processes, damaged entries, the off switch,
the directory flag, the size bound, uncacheable programs (host callbacks), SPMD and LAPACK
programs loaded from disk."""
import hashlib
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import plax
import plax.numpy as pnp
from plax.core.config import config
from plax.runtime import compile_cache
from plax.sharding import Mesh, NamedSharding, PartitionSpec

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)


@pytest.fixture
def cache(tmp_path):
    """The cache moved to a fresh directory (with ``jax_compilation_cache_dir``)."""
    saved = {n: config.read(n) for n in ("compilation_cache_dir", "enable_compilation_cache",
                                          "compilation_cache_max_size")}
    config.update("jax_compilation_cache_dir", str(tmp_path))
    try:
        yield tmp_path
    finally:
        for name, value in saved.items():
            config.update(name, value)


def entries(directory):
    return sorted(p for p in os.listdir(directory) if p.endswith(".xlaexe"))


def fresh(scale=2.0):
    """A new jitted function (so plax's in-memory caches miss) with the same program."""
    return plax.jit(lambda x: pnp.tanh(x) * scale + 1)


def want(x, scale=2.0):
    return np.tanh(x) * scale + 1


def test_dir_flag_places_entries_and_a_second_compile_hits(cache, tmp_path_factory):
    before = dict(compile_cache.stats)
    np.testing.assert_allclose(fresh()(X), want(X), rtol=1e-6)
    (name,) = entries(cache)
    assert len(name) == 64 + len(".xlaexe")
    assert compile_cache.stats["writes"] == before["writes"] + 1
    np.testing.assert_allclose(fresh()(X), want(X), rtol=1e-6)
    assert compile_cache.stats["hits"] == before["hits"] + 1
    other = tmp_path_factory.mktemp("elsewhere")
    config.update("jax_compilation_cache_dir", str(other))
    fresh()(X)
    assert entries(other) == [name]  # the same key in the new directory


DAMAGE = {  # how an entry is damaged -> what the warning says of it
    "garbage": "not a plax cache entry",
    "truncated": "truncated: ",
    "header only": "truncated: ",
    "foreign": "names another program's key",
    "flipped byte": "corrupt: its bytes do not match their sha256 checksum",
    "old format": "written in entry format 0",
    "a directory": "unreadable (IsADirectoryError",
    "unloadable": "not loadable by XLA",
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_entry_is_replaced_with_one_warning(cache, damage):
    compile_cache.reset()  # (the warning is given once per process)
    fresh()(X)
    (name,) = entries(cache)
    path = cache / name
    good = path.read_bytes()
    key = bytes.fromhex(name[:64])
    size = compile_cache._HEADER.size
    if damage == "garbage":
        path.write_bytes(os.urandom(len(good)))
    elif damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "header only":
        path.write_bytes(good[: size // 2])
    elif damage == "foreign":  # another program's entry under this name
        fresh(3.0)(X)
        (other,) = set(entries(cache)) - {name}
        path.write_bytes((cache / other).read_bytes())
    elif damage == "flipped byte":
        path.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    elif damage == "old format":
        path.write_bytes(good[:8] + (0).to_bytes(4, "little") + good[12:])
    elif damage == "a directory":
        path.unlink()
        path.mkdir()
    else:  # a whole entry whose payload XLA cannot load
        payload = b"not an executable"
        path.write_bytes(compile_cache._HEADER.pack(
            compile_cache._MAGIC, compile_cache.FORMAT_VERSION, key,
            hashlib.sha256(payload).digest(), len(payload)) + payload)
    rejected = compile_cache.stats["rejected"]
    with pytest.warns(UserWarning, match="Error reading persistent compilation cache entry") \
            as caught:
        np.testing.assert_allclose(fresh()(X), want(X), rtol=1e-6)
    (warning,) = [w for w in caught if "persistent compilation cache" in str(w.message)]
    assert name in str(warning.message) and DAMAGE[damage] in str(warning.message)
    assert compile_cache.stats["rejected"] == rejected + 1
    # replaced by a whole entry of this program's key (its length may differ from the first
    # write's by a byte or two: XLA's serialisation counts the programs the process compiled)
    assert compile_cache._read_payload(str(path), key) is not None
    hits = compile_cache.stats["hits"]
    np.testing.assert_allclose(fresh()(X), want(X), rtol=1e-6)
    assert compile_cache.stats["hits"] == hits + 1


def test_cache_faults_warn_once_per_process_then_log(cache, caplog):
    compile_cache.reset()
    for scale in (11.0, 12.0):
        fresh(scale)(X)
    for name in entries(cache):
        (cache / name).write_bytes(b"rubbish")
    with pytest.warns(UserWarning, match="persistent compilation cache entry") as caught, \
            caplog.at_level(logging.INFO, logger="plax"):
        for scale in (11.0, 12.0):
            np.testing.assert_allclose(fresh(scale)(X), want(X, scale), rtol=1e-6, atol=1e-6)
    assert len([w for w in caught if "compilation cache" in str(w.message)]) == 1
    logged = [r for r in caplog.records if "Error reading persistent" in r.getMessage()]
    assert len(logged) == 1


def test_raise_persistent_cache_errors_raises_the_fault(cache):
    fresh(13.0)(X)
    (name,) = entries(cache)
    (cache / name).write_bytes(b"rubbish")
    config.update("jax_raise_persistent_cache_errors", True)
    try:
        with pytest.raises(RuntimeError, match="jax_raise_persistent_cache_errors is set"):
            fresh(13.0)(X)
    finally:
        config.update("jax_raise_persistent_cache_errors", False)


def test_off_switch_writes_nothing(cache):
    config.update("jax_enable_compilation_cache", False)
    before = dict(compile_cache.stats)
    np.testing.assert_allclose(fresh()(X), want(X), rtol=1e-6)
    assert entries(cache) == [] and compile_cache.stats == before
    config.update("jax_enable_compilation_cache", True)
    config.update("jax_compilation_cache_max_size", 0)  # as in JAX: a zero bound is off too
    fresh()(X)
    assert entries(cache) == []


def test_size_bound_evicts_least_recently_used(cache):
    def write(n):
        x = np.ones((n,), np.float32)
        new = set(entries(cache))
        fresh()(x)
        (name,) = set(entries(cache)) - new
        return cache / name

    a, b = write(5), write(6)
    now = os.stat(a).st_mtime
    os.utime(a, (now - 100, now - 100))
    os.utime(b, (now - 50, now - 50))
    fresh()(np.ones((5,), np.float32))  # a hit on a: now the most recently used
    assert os.stat(a).st_mtime > now - 10
    size = os.stat(b).st_size
    config.update("jax_compilation_cache_max_size", os.stat(a).st_size + size + size // 2)
    c = write(7)
    assert a.exists() and c.exists() and not b.exists()
    assert sum(os.stat(cache / n).st_size for n in entries(cache)) <= \
        config.read("compilation_cache_max_size")


def test_programs_with_host_callbacks_are_not_written(cache, capfd):
    before = compile_cache.stats["uncacheable"]
    f = plax.jit(lambda x: plax.pure_callback(np.cos, plax.ShapeDtypeStruct(x.shape, x.dtype),
                                              x) + 1)
    np.testing.assert_allclose(f(X), np.cos(X) + 1, rtol=1e-6)

    def g(x):
        plax.debug.print("sum {s}", s=x.sum())
        return x * 2

    np.testing.assert_allclose(plax.jit(g)(X), X * 2)
    plax.effects_barrier()
    assert "sum" in capfd.readouterr().out
    assert entries(cache) == []
    assert compile_cache.stats["uncacheable"] == before + 2


def test_spmd_program_round_trips(cache):
    mesh = Mesh(np.array(plax.devices()[:8]).reshape(2, 4), ("a", "b"))
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    xs = plax.device_put(x, NamedSharding(mesh, PartitionSpec("a", "b")))

    def step():
        return plax.jit(lambda v: pnp.sin(v) @ v.T + v.sum(axis=0))

    first = step()(xs)
    n = len(entries(cache))
    hits = compile_cache.stats["hits"]
    second = step()(xs)
    assert compile_cache.stats["hits"] == hits + 1 and len(entries(cache)) == n
    ref = np.sin(x) @ x.T + x.sum(axis=0)
    np.testing.assert_allclose(second, ref, rtol=1e-5)
    np.testing.assert_array_equal(second, first)
    assert second.sharding == first.sharding


def test_concurrent_writers_leave_one_whole_entry(cache):
    results, errors = [], []

    def work():
        try:
            results.append(np.asarray(fresh(5.0)(X)))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 4
    for r in results:
        np.testing.assert_allclose(r, want(X, 5.0), rtol=1e-6)
    assert len(entries(cache)) == 1 and len(os.listdir(cache)) == 1  # no temporary files left


def test_unusable_directory_is_reported_once_and_programs_still_run(cache, caplog):
    blocked = cache / "a_file"
    blocked.write_text("not a directory")
    config.update("jax_compilation_cache_dir", str(blocked / "cache"))
    with caplog.at_level(logging.WARNING, logger="plax"):
        np.testing.assert_allclose(fresh(6.0)(X), want(X, 6.0), rtol=1e-6)
        np.testing.assert_allclose(fresh(7.0)(X), want(X, 7.0), rtol=1e-6)
    reports = [r.getMessage() for r in caplog.records if "not usable" in r.getMessage()]
    assert len(reports) == 1 and "a_file" in reports[0]


def test_make_key_covers_every_fact():
    base = compile_cache.make_key("module @m {}", (1, 1, False, (), ((0, "cpu", 0),), "cpu"))
    assert len(base) == 32
    for facts in [(1, 2, False, (), ((0, "cpu", 0),), "cpu"),
                  (1, 1, True, (), ((0, "cpu", 0),), "cpu"),
                  (1, 1, False, (("xla_opt", 1),), ((0, "cpu", 0),), "cpu"),
                  (1, 1, False, (), ((1, "cpu", 0),), "cpu"),
                  (1, 1, False, (), ((0, "cpu", 0),), "cuda")]:
        assert compile_cache.make_key("module @m {}", facts) != base
    assert compile_cache.make_key("module @n {}", (1, 1, False, (), ((0, "cpu", 0),),
                                                   "cpu")) != base


# --- across processes ----------------------------------------------------------------------
_SCRIPT = """
import json, logging, sys
import numpy as np
import plax, plax.numpy as pnp
from plax.runtime import compile_cache, xla

logging.basicConfig(level=logging.WARNING, format="LOG %(message)s")
a = np.array([[4., 1., 0.], [1., 3., 1.], [0., 1., 2.]], np.float32)
b = np.array([1., 2., 3.], np.float32)
if sys.argv[1] == "second":
    # Loaded straight from the cache before anything is lowered in this process: the LAPACK
    # kernels must get registered on the way.
    lapack_ready_before = xla._lapack_ready
    xla.compile(open("solve.mlir").read(), [plax.devices()[0]])
else:
    lapack_ready_before = None
    compile = xla.compile
    def spy(text, *args, **kwargs):
        if "lapack_" in text:
            open("solve.mlir", "w").write(text)
        return compile(text, *args, **kwargs)
    xla.compile = spy
plax.config.update("jax_log_compiles", True)

@plax.jit
def mlp_step(w, x):
    return w - 0.1 * plax.grad(lambda w: pnp.mean(pnp.tanh(x @ w) ** 2))(w)

w = np.full((3, 2), 0.5, np.float32)
out = {"step": np.asarray(mlp_step(w, a)).tolist(),
       "solve": np.asarray(plax.jit(pnp.linalg.solve)(a, b)).tolist(),
       "chol": np.asarray(plax.jit(pnp.linalg.cholesky)(a)).tolist(),
       "stats": compile_cache.stats, "lapack_ready_before": lapack_ready_before}
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The same program run in two fresh processes sharing a cache directory."""
    work = tmp_path_factory.mktemp("restart")
    (work / "prog.py").write_text(textwrap.dedent(_SCRIPT))
    env = dict(os.environ, PLAX_CACHE_DIR=str(work / "cache"), PLAX_NUM_CPU_DEVICES="8",
               PYTHONPATH=os.path.join(REPO, "src"))
    runs = []
    for which in ("first", "second"):
        proc = subprocess.run([sys.executable, "prog.py", which], cwd=work, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
        logs = [line[4:] for line in proc.stderr.splitlines() if line.startswith("LOG ")]
        runs.append((json.loads(result[7:]), logs))
    return runs


def test_cache_survives_a_process_restart(two_runs):
    (first, first_logs), (second, second_logs) = two_runs
    assert first["stats"]["writes"] > 0 and first["stats"]["hits"] == 0
    assert second["stats"]["misses"] == 0 and second["stats"]["writes"] == 0
    assert "Persistent compilation cache hit for jit_mlp_step" in second_logs
    assert not [m for m in second_logs if "XLA compiled" in m]
    assert any("miss for jit_mlp_step: XLA compiled" in m for m in first_logs)
    assert second["step"] == first["step"]


def test_linalg_program_from_the_cache_runs(two_runs):
    (first, _), (second, logs) = two_runs
    assert second["lapack_ready_before"] is False
    assert "Persistent compilation cache hit for jit_solve" in logs
    a = np.array([[4., 1., 0.], [1., 3., 1.], [0., 1., 2.]])
    np.testing.assert_allclose(second["solve"], np.linalg.solve(a, [1., 2., 3.]), rtol=1e-5)
    np.testing.assert_allclose(second["chol"], np.linalg.cholesky(a), rtol=1e-5)
    assert second["solve"] == first["solve"] and second["chol"] == first["chol"]
