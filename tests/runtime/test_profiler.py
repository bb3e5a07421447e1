"""plax.profiler: a trace written where TensorBoard and Perfetto look, read back with its
annotations (plax's own steps, named scopes and the user's), and the profiler's other
entry points."""
import glob
import gzip
import json
import os
import socket

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import profiler


def _events_of_xplane(path) -> set:
    data = profiler.ProfileData.from_file(path)
    return {event.name for plane in data.planes for line in plane.lines for event in line.events}


@pytest.fixture(scope="module")
def written_trace(tmp_path_factory):
    """One trace, collected once for the module: a fresh jitted function with a named scope,
    called twice (the first call traces, lowers, compiles and runs in Python; the second runs
    from C++), inside the user's annotations."""
    log_dir = tmp_path_factory.mktemp("profile")

    def profiled_probe(x):
        with plax.named_scope("probe_scope"):
            return jnp.sin(x) * 3.0 + 0.5

    f = plax.jit(profiled_probe)
    x = jnp.arange(4.0)
    with profiler.trace(log_dir, create_perfetto_trace=True):
        with profiler.TraceAnnotation("user_span", batch=7):
            first = f(x).block_until_ready()
        with profiler.StepTraceAnnotation("train", step_num=3):
            second = f(x + 1.0).block_until_ready()
    np.testing.assert_allclose(first, np.sin(np.arange(4.0)) * 3 + 0.5, rtol=1e-6)
    np.testing.assert_allclose(second, np.sin(np.arange(1.0, 5.0)) * 3 + 0.5, rtol=1e-6)
    (run,) = glob.glob(os.path.join(log_dir, "plugins", "profile", "*"))
    return run


def test_the_trace_is_laid_out_for_tensorboard_and_perfetto(written_trace):
    names = sorted(os.listdir(written_trace))
    assert "perfetto_trace.json.gz" in names
    assert [n for n in names if n.endswith(".xplane.pb")]
    assert [n for n in names if n.endswith(".trace.json.gz")]


def test_the_xplane_holds_plax_steps_scopes_and_the_users_annotations(written_trace):
    (xplane,) = glob.glob(os.path.join(written_trace, "*.xplane.pb"))
    names = _events_of_xplane(xplane)
    for expected in ("trace profiled_probe", "lower jit(profiled_probe)",
                     "compile jit(profiled_probe)", "execute jit(profiled_probe)",
                     "named_scope probe_scope", "user_span", "train",
                     "PjitFunction(profiled_probe)"):  # (the call dispatched by C++)
        assert expected in names, expected


def test_the_perfetto_trace_carries_the_annotations_metadata(written_trace):
    with gzip.open(os.path.join(written_trace, "perfetto_trace.json.gz")) as f:
        trace = json.load(f)
    assert "metadata" not in trace  # (Perfetto refuses it)
    by_name = {e.get("name"): e for e in trace["traceEvents"]}
    assert by_name["user_span"]["args"] == {"batch": "7"}
    assert by_name["train"]["args"]["step_num"] == "3"
    assert by_name["lower jit(profiled_probe)"]["dur"] > 0
    # The step's span lies within the user's annotation around it.
    user, step = by_name["user_span"], by_name["compile jit(profiled_probe)"]
    assert user["ts"] <= step["ts"] and step["ts"] + step["dur"] <= user["ts"] + user["dur"]


def test_one_trace_at_a_time(tmp_path):
    with pytest.raises(RuntimeError, match="No profile started"):
        profiler.stop_trace()
    profiler.start_trace(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="Profile has already been started"):
            profiler.start_trace(tmp_path)
    finally:
        profiler.stop_trace()
    assert glob.glob(os.path.join(tmp_path, "plugins", "profile", "*", "*.xplane.pb"))


def test_trace_as_a_decorator_and_annotate_function(tmp_path):
    @profiler.annotate_function
    def scaled(x, k=2.0):
        return x * k

    @profiler.trace(tmp_path)
    def work():
        return scaled(jnp.ones(3), k=5.0)

    np.testing.assert_allclose(work(), [5.0, 5.0, 5.0])
    assert scaled.__name__ == "scaled"
    (xplane,) = glob.glob(os.path.join(tmp_path, "plugins", "profile", "*", "*.xplane.pb"))
    assert any(n.endswith("scaled") for n in _events_of_xplane(xplane))


def test_device_memory_profile_is_gzipped_pprof(tmp_path):
    keep = jnp.ones((256,))  # a live buffer for the snapshot to list
    profile = profiler.device_memory_profile()
    assert gzip.decompress(profile)  # a pprof protocol buffer, gzipped
    path = tmp_path / "memory.prof"
    profiler.save_device_memory_profile(path)
    assert gzip.decompress(path.read_bytes())
    del keep


def test_the_profiler_server_starts_once_and_stops():
    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    profiler.start_server(port)
    try:
        with pytest.raises(ValueError, match="Only one profiler server"):
            profiler.start_server(port)
    finally:
        profiler.stop_server()
    with pytest.raises(ValueError, match="No active profiler server"):
        profiler.stop_server()


def test_experimental_profiled_instructions(written_trace):
    from plax.experimental import profiler as experimental_profiler
    # XLA times instructions only on GPU: a CPU trace gives an empty proto.
    assert experimental_profiler.get_profiled_instructions_proto(written_trace) == b""
    with pytest.raises(Exception, match="No such file or directory"):
        experimental_profiler.get_profiled_instructions_proto(written_trace + "-missing")
