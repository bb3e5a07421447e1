"""plax.experimental.serialize_executable: compiled functions to bytes and back."""
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import serialize_executable as se

W = np.arange(6, dtype=np.float32).reshape(3, 2)  # a constant the function closes over


def model(params, x, scale):
    return {"y": jnp.tanh(x @ params["w"] + params["b"]) * scale, "n": jnp.sum(x)}


def reference(params, x, scale):
    return {"y": np.tanh(x @ params["w"] + params["b"]) * scale, "n": np.sum(x)}


PARAMS = {"w": W, "b": np.float32(0.5)}
X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)


def check(out, want):
    assert sorted(out) == sorted(want)
    for k in want:
        np.testing.assert_allclose(np.asarray(out[k]), want[k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["pytree", "static", "closure"])
def test_round_trip_in_process(case):
    if case == "pytree":
        f, args, call_args, want = plax.jit(model), (PARAMS, X, 2.0), (PARAMS, X, 2.0), \
            reference(PARAMS, X, 2.0)
    elif case == "static":
        f = plax.jit(model, static_argnums=2)
        args, call_args, want = (PARAMS, X, 3.0), (PARAMS, X), reference(PARAMS, X, 3.0)
    else:
        f = plax.jit(lambda x: {"y": jnp.sin(x) @ W, "n": jnp.max(x)})
        args = call_args = (X,)
        want = {"y": np.sin(X) @ W, "n": np.max(X)}
    compiled = f.lower(*args).compile()
    payload, in_tree, out_tree = se.serialize(compiled)
    assert isinstance(payload, bytes) and in_tree == compiled.in_tree
    loaded = se.deserialize_and_load(payload, in_tree, out_tree)
    check(loaded(*call_args), want)
    check(compiled(*call_args), want)
    assert loaded.out_info == compiled.out_info
    # a loaded executable serialises again to something that loads and runs
    again = se.deserialize_and_load(se.serialize(loaded)[0], in_tree, out_tree)
    check(again(*call_args), want)


@pytest.mark.needs_devices(2)
def test_execution_devices_choose_where_it_runs():
    compiled = plax.jit(lambda x: x * 2 + 1).lower(X).compile()
    payload, in_tree, out_tree = se.serialize(compiled)
    dev = plax.devices()[1]
    loaded = se.deserialize_and_load(payload, in_tree, out_tree, execution_devices=[dev])
    out = loaded(X)
    assert out.devices() == {dev}
    np.testing.assert_allclose(out, X * 2 + 1)


def test_a_fresh_process_loads_and_runs_it(tmp_path):
    compiled = plax.jit(model).lower(PARAMS, X, 2.0).compile()
    payload, in_tree, out_tree = se.serialize(compiled)
    (tmp_path / "exe.bin").write_bytes(payload)
    (tmp_path / "inputs.pkl").write_bytes(pickle.dumps((PARAMS, X)))
    script = textwrap.dedent("""
        import pickle, sys, numpy as np
        import plax
        from plax.experimental import serialize_executable as se
        params, x = pickle.loads(open(sys.argv[1] + "/inputs.pkl", "rb").read())
        in_tree = plax.tree_util.tree_structure(((params, x, 2.0), {}))
        out_tree = plax.tree_util.tree_structure({"n": 0, "y": 0})
        loaded = se.deserialize_and_load(open(sys.argv[1] + "/exe.bin", "rb").read(),
                                         in_tree, out_tree)
        out = loaded(params, x, 2.0)
        np.save(sys.argv[1] + "/y.npy", np.asarray(out["y"]))
        print(float(out["n"]))
        """)
    env = dict(os.environ, PLAX_NUM_CPU_DEVICES="1")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    want = reference(PARAMS, X, 2.0)
    assert float(done.stdout.strip()) == pytest.approx(float(want["n"]), abs=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want["y"], rtol=1e-5)


def test_calls_with_other_types_are_refused():
    compiled = plax.jit(lambda x: x + 1).lower(X).compile()
    loaded = se.deserialize_and_load(*se.serialize(compiled))
    with pytest.raises(TypeError, match="Argument types differ"):
        loaded(X.astype(np.int32))
    with pytest.raises(TypeError, match="input pytree does not match"):
        loaded(X, X)


def test_damaged_or_foreign_payloads_are_refused():
    compiled = plax.jit(lambda x: x + 1).lower(X).compile()
    payload, in_tree, out_tree = se.serialize(compiled)
    for bad in (payload[:10], b"not an executable", payload[:len(payload) // 2]):
        with pytest.raises(ValueError, match="deserialize_and_load"):
            se.deserialize_and_load(bad, in_tree, out_tree)
    newer = payload.replace(b"EXECUTABLE\n\x01\x00", b"EXECUTABLE\n\x09\x00", 1)
    with pytest.raises(ValueError, match="format version 9"):
        se.deserialize_and_load(newer, in_tree, out_tree)


def test_what_cannot_be_serialised_is_refused():
    with pytest.raises(TypeError, match="compiled function"):
        se.serialize(plax.jit(lambda x: x))
    with_callback = plax.jit(lambda x: plax.pure_callback(
        lambda v: np.asarray(v) * 2, plax.ShapeDtypeStruct(x.shape, x.dtype), x))
    with pytest.raises(ValueError, match="does not support serialization"):
        se.serialize(with_callback.lower(X).compile())
    keyed = plax.jit(lambda k: plax.random.normal(k, (2,)))
    with pytest.raises(NotImplementedError, match="PRNG key array"):
        se.serialize(keyed.lower(plax.random.key(0)).compile())


@pytest.mark.needs_devices(4)
def test_a_program_over_several_devices():
    from plax.sharding import NamedSharding, PartitionSpec as P
    mesh = plax.make_mesh((4,), ("x",))
    x = plax.device_put(np.arange(16.0, dtype=np.float32).reshape(8, 2),
                        NamedSharding(mesh, P("x")))
    f = plax.jit(lambda v: {"rows": (jnp.sin(v) * 2).sum(axis=1), "total": jnp.sum(v)})
    compiled = f.lower(x).compile()
    loaded = se.deserialize_and_load(*se.serialize(compiled))
    out = loaded(x)
    np.testing.assert_allclose(out["rows"], (np.sin(np.asarray(x)) * 2).sum(axis=1), rtol=1e-6)
    assert float(out["total"]) == 120.0
    assert out["rows"].sharding == compiled(x)["rows"].sharding
    assert loaded.input_shardings == compiled.input_shardings
    with pytest.raises(ValueError, match="not all among the execution devices"):
        se.deserialize_and_load(*se.serialize(compiled), execution_devices=plax.devices()[4:])
