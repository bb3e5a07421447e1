"""plax.export of SPMD functions: the module keeps the meshes and shardings, the Exported
its layouts over AbstractMeshes, and calling it runs over a mesh of that many devices."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import export, lax
from plax.core.jaxpr import check_jaxpr
from plax.sharding import Mesh, NamedSharding, PartitionSpec as P

pytestmark = pytest.mark.needs_devices(2)

A = np.arange(64, dtype=np.float32).reshape(16, 4)


@pytest.fixture(scope="module")
def mesh():
    return Mesh(np.array(plax.devices()[:2]), ("x",))


@pytest.fixture(scope="module")
def exp(mesh):
    f = plax.jit(lambda b, unused: b * 2.0,
                 in_shardings=(NamedSharding(mesh, P("x", None)), None),
                 out_shardings=NamedSharding(mesh, P(None, "x")))
    return export.deserialize(export.export(f)(A, A).serialize())


def test_module_and_exported_keep_the_layouts(exp):
    assert exp.nr_devices == 2
    text = exp.mlir_module()
    assert "mhlo.num_partitions = 2" in text and 'sdy.mesh @mesh = <["x"=2]>' in text
    assert '%arg0: tensor<16x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}' \
        in text
    assert "%arg1: tensor<16x4xf32> {" not in text  # unspecified: no attribute
    ins = exp.in_shardings_jax(None)
    assert ins[1] is None and ins[0].spec == P("x", None)
    assert (ins[0].mesh.axis_names, ins[0].mesh.axis_sizes) == (("x",), (2,))
    assert exp.in_shardings_hlo[1] is None
    assert exp.in_shardings_hlo[0] == ins[0]._to_xla_hlo_sharding(2)
    assert exp.out_shardings_jax(None)[0].spec == P(None, "x")


@pytest.mark.parametrize("order", [slice(None), slice(None, None, -1)])
def test_called_over_a_mesh_of_other_devices(exp, mesh, order):
    run_mesh = Mesh(np.array(plax.devices()[:2])[order], ("x",))
    args = [plax.device_put(A, s) for s in exp.in_shardings_jax(run_mesh)[:1]]
    args.append(plax.device_put(A, NamedSharding(run_mesh, P())))
    out = exp.call(*args)
    np.testing.assert_allclose(np.asarray(out), A * 2.0)
    assert len(out.sharding.device_set) == 2


def test_called_on_other_device_counts_or_meshes_is_an_error(exp):
    with pytest.raises(ValueError, match="exported for 2 devices and is called in a context "
                                         "with 1 devices"):
        exp.call(A, A)
    with pytest.raises(ValueError, match="does not match the mesh used for export"):
        exp.in_shardings_jax(Mesh(np.array(plax.devices()[:2]), ("y",)))


def test_runs_over_the_context_mesh(exp):
    run_mesh = Mesh(np.array(plax.devices()[:2]), ("x",))
    with plax.set_mesh(run_mesh):
        out = exp.call(A, A)
    np.testing.assert_allclose(np.asarray(out), A * 2.0)
    assert len(out.sharding.device_set) == 2


def test_grad_of_sharded_export_is_cos(mesh):
    f = plax.jit(lambda x: jnp.sin(x).sum(), in_shardings=NamedSharding(mesh, P("x")))
    exp = export.deserialize(export.export(f)(A).serialize(vjp_order=1))
    assert exp.vjp().nr_devices == 2
    x = plax.device_put(A, NamedSharding(mesh, P("x")))
    np.testing.assert_allclose(np.asarray(plax.grad(exp.call)(x)), np.cos(A), rtol=1e-6)


@pytest.mark.parametrize("shape", [None, "2*b, _"])
def test_shard_map_with_collective_permute(mesh, shape):
    @plax.jit
    def f(b):
        def body(blk):
            return lax.ppermute(blk, "x", perm=[(0, 1), (1, 0)])
        return plax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(b)
    args = export.symbolic_args_specs((A,), shape) if shape else (A,)
    exp = export.deserialize(export.export(f)(*args).serialize())
    out = exp.call(plax.device_put(A, NamedSharding(mesh, P())))
    np.testing.assert_allclose(np.asarray(out), np.roll(A, 8, axis=0))


def test_check_jaxpr_binds_shard_map_axes(mesh):
    def f(b):
        return plax.shard_map(lambda blk: lax.psum(blk, "x"), mesh=mesh, in_specs=P("x"),
                              out_specs=P())(b)
    check_jaxpr(plax.make_jaxpr(f)(A).jaxpr)
