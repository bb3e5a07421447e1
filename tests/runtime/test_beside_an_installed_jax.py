"""plax used directly in a process where a JAX is installed (a TPU machine has one, with
libtpu): jaxlib's C++ code imports ``jax`` modules on some paths, and must get plax's answers,
never that JAX: importing it would put JAX's methods on the C++ classes plax shares."""
from test_drop_in import run_python

# Each line reaches jaxlib's C++ array code on a path that looks up "jax" modules.
_USES = """
import numpy as np, plax, plax.numpy as jnp
from plax.sharding import Mesh, NamedSharding, PartitionSpec as P
a = jnp.asarray(np.arange(6.0))
assert a.unsafe_buffer_pointer() != 0
assert a.on_device_size_in_bytes() == 24
a.copy_to_host_async()
assert np.asarray(a).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
b = jnp.from_dlpack(a)
assert b.unsafe_buffer_pointer() == a.unsafe_buffer_pointer()
mesh = Mesh(np.array(plax.devices()[:2]), ("x",))
s = plax.device_put(np.arange(8.0), NamedSharding(mesh, P("x")))
assert [sh.data.unsafe_buffer_pointer() != 0 for sh in s.addressable_shards] == [True, True]
s.copy_to_host_async()
assert float(plax.jit(lambda v: (v * 2).sum())(s)) == 56.0
assert (a[1:3] + 1).tolist() == [2.0, 3.0]
import sys
print("jax modules:", sorted(m for m in sys.modules if m == "jax" or m.startswith("jax.")))
"""


def test_jaxlib_lookups_never_import_an_installed_jax(tmp_path):
    fake = tmp_path / "site" / "jax"
    fake.mkdir(parents=True)
    marker = tmp_path / "imported"
    # A stand-in for an installed JAX: it only records that something imported it.
    (fake / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    proc = run_python(["-c", _USES], tmp_path, pythonpath=[tmp_path / "site"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["jax modules: []"]
    assert not marker.exists()


_WHILE_READING = """
import sys, threading
import plax
from plax.runtime.jaxlib_lookups import answer_jaxlib_lookups
seen = []
with answer_jaxlib_lookups:  # (what each array read through jaxlib opens)
    t = threading.Thread(target=lambda: seen.append(__import__("jax").core.Tracer))
    t.start(); t.join()
    seen.append(sys.modules["jax"].__name__)
print(seen[0] is plax.core.Tracer, seen[1])
"""


def test_under_the_alias_reads_swap_no_jax_module_another_thread_could_meet(tmp_path):
    # (Keras's fit imports jax in worker threads while arrays are being read)
    proc = run_python(["-m", "plax", "-c", _USES + _WHILE_READING], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "True plax"
