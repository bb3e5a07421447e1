"""plax.experimental.colocated_python: functions and objects run with the CPU devices their
arrays are on (on one host: here), specialisation, devices found or given, and the errors."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import colocated_python as cp
from plax.experimental.colocated_python import serialization
from plax.sharding import NamedSharding, PartitionSpec as P, SingleDeviceSharding


def test_colocated_cpu_devices_of_cpu_devices_and_a_mesh_are_themselves():
    devices = plax.devices()
    assert cp.colocated_cpu_devices(devices[2:5]) == devices[2:5]
    mesh = plax.make_mesh((2, 4), ("a", "b"))
    cpu_mesh = cp.colocated_cpu_devices(mesh)
    assert cpu_mesh.axis_names == ("a", "b") and cpu_mesh.devices.shape == (2, 4)
    assert list(cpu_mesh.devices.flat) == list(mesh.devices.flat)


def test_a_colocated_function_runs_on_its_arguments_and_returns_their_arrays():
    device = plax.devices()[3]
    calls = []

    @cp.colocated_python
    def scale(x, *, by):
        calls.append(x.sharding)
        return {"y": x * by, "n": x.sum()}

    x = plax.device_put(jnp.arange(4.0), device)
    out = scale(x, by=plax.device_put(jnp.float32(3.0), device))
    assert out["y"].tolist() == [0.0, 3.0, 6.0, 9.0] and float(out["n"]) == 6.0
    assert out["y"].sharding == SingleDeviceSharding(device)
    assert calls == [SingleDeviceSharding(device)]
    assert scale(x + 1, by=x[1])["y"].tolist() == [1.0, 2.0, 3.0, 4.0]


def test_a_sharded_argument_keeps_its_sharding():
    mesh = plax.make_mesh((8,), ("x",))
    s = NamedSharding(mesh, P("x"))
    double = cp.colocated_python(lambda v: v * 2)
    out = double(plax.device_put(np.arange(8.0), s))
    assert out.sharding == s and out.tolist() == list(np.arange(8.0) * 2)


def test_no_arguments_needs_devices_from_specialize():
    device = plax.devices()[1]
    make = cp.colocated_python(lambda: plax.device_put(jnp.ones(2), device))
    with pytest.raises(ValueError, match="must be first specialized with devices"):
        make()
    assert make.specialize(devices=[device])().tolist() == [1.0, 1.0]


def test_specialize_checks_inputs_and_outputs_and_refuses_twice():
    device = plax.devices()[0]
    x = plax.device_put(jnp.arange(3.0), device)
    spec = plax.ShapeDtypeStruct((3,), jnp.float32)
    neg = cp.colocated_python(lambda v: -v).specialize(
        in_specs=((spec,), {}), out_specs_fn=lambda s: s)
    assert neg(x).tolist() == [0.0, -1.0, -2.0]
    with pytest.raises(ValueError, match="arguments, leaf 0"):
        neg(plax.device_put(jnp.arange(4.0), device))
    with pytest.raises(ValueError, match="in_specs already specified"):
        neg.specialize(in_specs=((spec,), {}))
    wrong = cp.colocated_python(lambda v: v[:2]).specialize(out_specs_fn=lambda s: s)
    with pytest.raises(ValueError, match="results, leaf 0"):
        wrong(x)


def test_arguments_on_different_devices_and_host_data_are_refused():
    a = plax.device_put(jnp.ones(2), plax.devices()[0])
    b = plax.device_put(jnp.ones(2), plax.devices()[1])
    add = cp.colocated_python(lambda u, v: u + v)
    with pytest.raises(ValueError, match="must use the same device list"):
        add(a, b)
    with pytest.raises(ValueError, match="only supports jax.Array as input and output"):
        add(a, np.ones(2))


def test_a_colocated_class_makes_its_object_at_the_first_call_and_keeps_it():
    made = []

    @cp.colocated_python_class
    class Counter:
        def __init__(self, start):
            made.append(start)
            self.n = start

        def add(self, x):
            self.n += 1
            return x + self.n

    counter = Counter(10)
    assert made == []
    x = plax.device_put(jnp.zeros(2), plax.devices()[2])
    assert counter.add(x).tolist() == [11.0, 11.0] and counter.add(x).tolist() == [12.0, 12.0]
    assert made == [10] and Counter.__name__ == "Counter"
    with pytest.raises(AttributeError, match="no method 'missing'"):
        counter.missing


def test_serialization_writes_devices_and_shardings_by_cpu_device_id():
    devices = plax.devices()
    mesh = plax.make_mesh((2, 4), ("a", "b"))
    named = NamedSharding(mesh, P("a"))
    data = serialization._serialize((named, devices[2], mesh, SingleDeviceSharding(devices[5]),
                                     plax.ShapeDtypeStruct((2,), jnp.float32)))
    back = serialization._deserialize(data)
    assert back[0] == named and back[1] is devices[2] and back[2] == mesh
    assert back[3] == SingleDeviceSharding(devices[5])
    assert back[4] == plax.ShapeDtypeStruct((2,), jnp.float32)
