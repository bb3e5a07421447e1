"""Arrays spanning two processes (run by test_global_arrays.py through the launcher):
each check prints ``CHECK <name> PASS`` or ``CHECK <name> FAIL <detail>``; ``DONE`` at the
end. Values are compared with NumPy here; the data-parallel step's parameters are printed
(``PARAMS <hex>``) for the test to compare with its single-process run."""
import copy
import os
import sys

import numpy as np

import jax
import jax.numpy as jnp
from jax.experimental import io_callback
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dp_step  # noqa: E402  (beside this program)

jax.distributed.initialize()
pid, n = jax.process_index(), jax.process_count()
PHRASE = ("Fetching value for `jax.Array` that spans non-addressable (non process local) "
          "devices is not possible")


def check(name, ok, detail=""):
    print(f"CHECK {name} {'PASS' if ok else 'FAIL'} {detail}".rstrip(), flush=True)


def raises(name, kind, phrase, fn):
    try:
        fn()
    except kind as e:
        check(name, phrase in str(e), str(e)[:300])
    except Exception as e:  # the wrong kind of error
        check(name, False, f"{type(e).__name__}: {e}")
    else:
        check(name, False, "no error")


def shards_match(arr, whole):
    """Every addressable shard of ``arr`` holds its block of ``whole``."""
    return all(np.array_equal(np.asarray(s.data), whole[s.index]) for s in arr.addressable_shards)


devs = jax.devices()
check("devices", n == 2 and len(devs) == 8 and len(jax.local_devices()) == 4
      and all(d.process_index == pid for d in jax.local_devices()))
mesh = Mesh(np.array(devs), ("x",))
grid = Mesh(np.array(devs).reshape(2, 4), ("p", "l"))
by_x = NamedSharding(mesh, P("x"))
G = np.arange(16, dtype=np.float32)
H = np.arange(32, dtype=np.float32).reshape(4, 8)

# --- building a global array from this process's pieces ---
calls = []
a = jax.make_array_from_callback((16,), by_x, lambda idx: (calls.append(idx), G[idx])[1])
check("callback_only_local", sorted(c[0].start for c in calls) == list(range(8 * pid, 8 * pid + 8, 2)),
      str(calls))
check("not_fully_addressable", a.shape == (16,) and not a.is_fully_addressable
      and not a.sharding.is_fully_addressable)
check("addressable_devices", a.sharding.addressable_devices == set(jax.local_devices()))
check("addressable_shards", len(a.addressable_shards) == 4 and shards_match(a, G)
      and all(s.device.process_index == pid for s in a.addressable_shards))
gs = a.global_shards
check("global_shards", len(gs) == 8
      and {s.device: s.index[0].start for s in gs} == {d: 2 * i for i, d in enumerate(devs)}
      and all((s.data is None) == (s.device.process_index != pid) for s in gs))
check("addressable_data", np.array_equal(np.asarray(a.addressable_data(1)),
                                         G[8 * pid + 2:8 * pid + 4]))

# --- reading it whole is refused; its repr is its type ---
for name, fn in (("asarray", lambda: np.asarray(a)), ("__array__", lambda: a.__array__()),
                 ("tolist", a.tolist), ("item", a.item), ("device_get", lambda: jax.device_get(a))):
    raises(f"read_{name}", RuntimeError, PHRASE, fn)
raises("float_not_scalar", TypeError, "Only scalar arrays can be converted", lambda: float(a))
check("repr", repr(a) == "Array(shape=(16,), dtype=float32)" and str(a) == repr(a)
      and f"{a}" == repr(a), repr(a))

total = jax.jit(lambda x: x.sum(), out_shardings=NamedSharding(mesh, P()))(a)
check("replicated_readable", not total.is_fully_addressable and total.is_fully_replicated
      and float(total) == G.sum() and repr(total) == "Array(120., dtype=float32)", repr(total))

# --- device_put of a value every process holds: each puts its part ---
b = jax.device_put(H, NamedSharding(grid, P("p", "l")))
check("device_put_split", b.shape == (4, 8) and not b.is_fully_addressable
      and len(b.addressable_shards) == 4 and shards_match(b, H))
c = jax.device_put(H, NamedSharding(grid, P(None, "l")))  # copies across the processes
check("device_put_partial", shards_match(c, H) and len(c.addressable_shards) == 4)
r = jax.device_put(H, NamedSharding(grid, P()))
check("device_put_replicated", np.array_equal(np.asarray(r), H) and not r.is_fully_addressable)
moved = jax.device_put(a, NamedSharding(mesh, P()))  # a global array, moved by XLA
check("device_put_global_reshard", np.array_equal(np.asarray(moved), G))

other = next(dv for dv in devs if dv.process_index != pid)
far = jax.device_put(np.ones(3, np.float32), other)  # another process's device: no shard here
check("remote_device", not far.is_fully_addressable and far.addressable_shards == []
      and repr(far) == "Array(shape=(3,), dtype=float32)"
      and repr(jax.jit(lambda v: v + 1)(far)) == repr(far), repr(far))
raises("remote_device_read", RuntimeError, PHRASE, lambda: np.asarray(far))

# --- make_array_from_process_local_data / make_array_from_single_device_arrays ---
local = np.arange(6, dtype=np.float32).reshape(3, 2) + 100 * pid
d = jax.make_array_from_process_local_data(NamedSharding(grid, P("p")), local)
check("local_data_infer_rows", d.shape == (6, 2)
      and all(np.array_equal(np.asarray(s.data), local) for s in d.addressable_shards))
d = jax.make_array_from_process_local_data(by_x, np.arange(8, dtype=np.float32) + 8 * pid)
check("local_data_infer_split", d.shape == (16,) and shards_match(d, G))
d = jax.make_array_from_process_local_data(NamedSharding(grid, P(None, "l")), H[:2, :4])
check("local_data_infer_whole_dim", d.shape == (2, 4) and shards_match(d, H[:2, :4]))
d = jax.make_array_from_process_local_data(by_x, G, global_shape=(16,))
check("local_data_explicit_global", d.shape == (16,) and shards_match(d, G))
d = jax.make_array_from_process_local_data(NamedSharding(grid, P("p", "l")), H[2 * pid:2 * pid + 2],
                                          global_shape=(4, 8))
check("local_data_mixed_dims", shards_match(d, H))
tree = jax.make_array_from_process_local_data(by_x, {"u": np.arange(8.0) + 8 * pid,
                                                      "v": np.ones(8) * pid})
check("local_data_pytree", tree["u"].shape == (16,) and tree["v"].shape == (16,)
      and shards_match(tree["v"], np.repeat([0.0, 1.0], 8)))
raises("local_data_bad_dim", ValueError, "Invalid host data",
       lambda: jax.make_array_from_process_local_data(by_x, np.arange(5.0), global_shape=(16,)))
pieces = [jax.device_put(G[2 * i:2 * i + 2], dv) for i, dv in enumerate(devs) if dv.process_index == pid]
e = jax.make_array_from_single_device_arrays((16,), by_x, pieces)
check("single_device_arrays", e.shape == (16,) and shards_match(e, G))
raises("single_device_arrays_count", ValueError, "Expected 4",
       lambda: jax.make_array_from_single_device_arrays((16,), by_x, pieces[:3]))

# --- eager operations on a global array run over its devices ---
check("eager_ops", shards_match(a + 1, G + 1) and shards_match(jnp.where(a > 3, a, 0), np.where(G > 3, G, 0))
      and float(a[3]) == 3.0 and float(a.sum()) == G.sum()
      and shards_match(jax.grad(lambda v: (v ** 2).sum())(a), 2 * G))
dup = copy.copy(a)
check("copy", dup.sharding == a.sharding and shards_match(dup, G)
      and all(s.data.unsafe_buffer_pointer() != t.data.unsafe_buffer_pointer()
              for s, t in zip(dup.addressable_shards, a.addressable_shards)))

# --- jit over the global mesh ---
doubled = jax.jit(lambda x: x * 2 + 1)(a)
check("jit_global_arg", doubled.sharding == by_x and not doubled.is_fully_addressable
      and shards_match(doubled, G * 2 + 1))
col = jax.jit(lambda x: x.sum(axis=0), in_shardings=NamedSharding(grid, P("p", "l")),
              out_shardings=NamedSharding(grid, P()))(b)
check("jit_in_out_shardings", np.array_equal(np.asarray(col), H.sum(axis=0)))
outer = jax.jit(lambda x: jnp.outer(x, x), out_shardings=NamedSharding(grid, P("p", "l")))(a)
check("jit_global_result", outer.shape == (16, 16) and shards_match(outer, np.outer(G, G)))
raises("jit_numpy_split", ValueError, "Passing non-trivial shardings for numpy inputs is not allowed",
       lambda: jax.jit(lambda x: x, in_shardings=by_x)(G))
plus = jax.jit(lambda x: x + 1, in_shardings=NamedSharding(mesh, P()))(G)
check("jit_numpy_replicated", np.array_equal(np.asarray(plus), G + 1))

# --- shard_map: a psum over all 8 devices ---
summed = jax.jit(jax.shard_map(lambda x: jax.lax.psum(x, "x"), mesh=mesh, in_specs=P("x"),
                               out_specs=P()))(a)
check("shard_map_psum", np.array_equal(np.asarray(summed), G.reshape(8, 2).sum(axis=0)),
      str(np.asarray(summed)))
ids = jax.jit(jax.shard_map(lambda x: x * 0 + jax.lax.axis_index("x"), mesh=mesh,
                            in_specs=P("x"), out_specs=P("x")))(a)
check("shard_map_axis_index", shards_match(ids, np.repeat(np.arange(8.0), 2)))

# --- host callbacks: each process runs its own devices' ordered callbacks ---
got = []


def record(v):
    got.append(float(v))
    return np.float32(v)


per_device = G.reshape(8, 2).sum(axis=1)
out = jax.jit(jax.shard_map(
    lambda x: x + io_callback(record, jax.ShapeDtypeStruct((), jnp.float32), x.sum(),
                              ordered=True),
    mesh=mesh, in_specs=P("x"), out_specs=P("x")))(a)
jax.effects_barrier()
check("ordered_callback_in_shard_map", sorted(got) == sorted(per_device[4 * pid:4 * pid + 4])
      and shards_match(out, G + np.repeat(per_device, 2)), str(got))

# --- pmap: each process maps over its devices, collectives span both ---
mine = np.arange(4.0, dtype=np.float32) + 10 * pid
ps = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(mine)
everyone = np.arange(4.0).sum() * 2 + 10 * 4
check("pmap_psum", ps.shape == (4,) and ps.is_fully_addressable
      and np.array_equal(np.asarray(ps), np.full(4, everyone)), str(np.asarray(ps)))
check("pmap_result_local", {s.device for s in ps.addressable_shards} == set(jax.local_devices()))
idx = jax.pmap(lambda x: x * 0 + jax.lax.axis_index("i"), axis_name="i")(mine)
check("pmap_axis_index", np.array_equal(np.asarray(idx), np.arange(4.0) + 4 * pid))
given = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i", devices=devs)(mine)
check("pmap_given_devices", np.array_equal(np.asarray(given), np.full(4, everyone)))
again = jax.pmap(lambda x, y: x * 2 + y, in_axes=(0, None))(ps, np.float32(pid))
check("pmap_chained", np.array_equal(np.asarray(again), np.full(4, 2 * everyone + pid)))

# --- a data-parallel training step over the global mesh ---
x, y = dp_step.data()
rows = slice(8 * pid, 8 * pid + 8)
gx = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), x[rows])
gy = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), y[rows])
w = dp_step.train(jax, gx, gy, NamedSharding(mesh, P()))
print(f"PARAMS {np.asarray(w).tobytes().hex()}", flush=True)
print("DONE", flush=True)
