"""plax.ops: segment_sum/prod/max/min against NumPy's ufunc.at, under jit, vmap and grad."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import ops
from plax.errors import ConcretizationTypeError
from plax.sharding import Mesh, NamedSharding, PartitionSpec as P
from plax.test_util import check_grads

# name -> (NumPy ufunc, identity for float32)
KINDS = {"segment_sum": (np.add, 0.0), "segment_prod": (np.multiply, 1.0),
         "segment_max": (np.maximum, -np.inf), "segment_min": (np.minimum, np.inf)}
IDS = np.array([0, 0, 5, -1, 2, 2, 1, 3])  # 5 and -1 are outside [0, 4)
DATA = np.random.default_rng(0).normal(size=(8, 2)).astype(np.float32)


def reference(name, data, ids, num, mode=None, identity=None):
    """NumPy's model: identity-filled output, ufunc.at over the ids kept (or clipped)."""
    ufunc, fill = KINDS[name]
    out = np.full((num,) + data.shape[1:], fill if identity is None else identity, data.dtype)
    if mode == "clip":
        ids, keep = np.clip(ids, 0, num - 1), np.ones(len(ids), bool)
    else:
        keep = (ids >= 0) & (ids < num)
    ufunc.at(out, ids[keep], data[keep])
    return out


@pytest.mark.parametrize("name", list(KINDS))
@pytest.mark.parametrize("mode,bucket_size", [(None, None), ("clip", None), ("drop", 3),
                                              ("clip", 2)])
def test_segment_reductions_match_numpy(name, mode, bucket_size):
    out = getattr(ops, name)(DATA, IDS, 4, mode=mode, bucket_size=bucket_size)
    assert out.shape == (4, 2) and out.dtype == np.float32
    np.testing.assert_allclose(out, reference(name, DATA, IDS, 4, mode), rtol=1e-6)


@pytest.mark.parametrize("name", list(KINDS))
def test_num_segments_none_is_one_past_the_largest_id(name):
    out = getattr(ops, name)(DATA, IDS)
    np.testing.assert_allclose(out, reference(name, DATA, IDS, 6), rtol=1e-6)
    jitted = plax.jit(getattr(ops, name), static_argnums=2)(DATA, IDS, 4)
    np.testing.assert_allclose(jitted, reference(name, DATA, IDS, 4), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8])
@pytest.mark.parametrize("name,identity", [("segment_sum", 0), ("segment_prod", 1),
                                           ("segment_max", "min"), ("segment_min", "max")])
def test_integer_segments_and_their_identities(dtype, name, identity):
    data = np.arange(1, 9).astype(dtype)
    if isinstance(identity, str):
        identity = getattr(np.iinfo(dtype), identity)
    out = getattr(ops, name)(data, IDS, 4)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, reference(name, data, IDS, 4, identity=identity))


def test_bool_max_and_min():
    data = np.array([True, False, True, False, True, True, False, False])
    ids = np.array([0, 0, 1, 1, 3, 3, 3, 3])
    np.testing.assert_array_equal(ops.segment_max(data, ids, 4), [True, True, False, True])
    np.testing.assert_array_equal(ops.segment_min(data, ids, 4), [False, False, True, False])


def test_scalar_data_broadcasts_over_the_ids():
    np.testing.assert_array_equal(ops.segment_sum(1.0, np.array([0, 1, 1]), 3), [1.0, 2.0, 0.0])


def test_grad_of_segment_sum_gathers_the_cotangent():
    weights = np.arange(1.0, 5.0, dtype=np.float32)
    grad = plax.grad(lambda x: jnp.sum(weights[:, None] * ops.segment_sum(x, IDS, 4)))(DATA)
    keep = (IDS >= 0) & (IDS < 4)
    want = np.where(keep, weights[np.clip(IDS, 0, 3)], 0.0)[:, None] * np.ones((1, 2))
    np.testing.assert_allclose(grad, want, rtol=1e-6)
    check_grads(lambda x: ops.segment_sum(x, IDS, 4, bucket_size=3), (DATA,), order=2)


def test_grad_of_segment_max_goes_to_the_winners_shared_by_ties():
    x = np.array([1.0, 3.0, 2.0, 2.0, 5.0, 5.0], np.float32)
    ids = np.array([0, 0, 5, -1, 2, 2])
    grad = plax.grad(lambda v: jnp.sum(ops.segment_max(v, ids, 4)))(x)
    np.testing.assert_allclose(grad, [0.0, 1.0, 0.0, 0.0, 0.5, 0.5])
    check_grads(lambda v: ops.segment_max(v, IDS, 4), (DATA,), order=1)
    check_grads(lambda v: ops.segment_min(v, IDS, 4, mode="clip"), (DATA,), order=1)


def test_vmap_over_data_and_over_ids():
    datas = np.stack([DATA, 2 * DATA])
    out = plax.vmap(lambda d: ops.segment_sum(d, IDS, 4))(datas)
    np.testing.assert_allclose(out, [reference("segment_sum", d, IDS, 4) for d in datas],
                               rtol=1e-6)
    idss = np.stack([IDS, IDS[::-1]])
    out = plax.vmap(lambda i: ops.segment_max(DATA, i, 4))(idss)
    np.testing.assert_allclose(out, [reference("segment_max", DATA, i, 4) for i in idss])


@pytest.mark.needs_devices(4)
def test_out_sharding_lays_the_result_out():
    mesh = Mesh(np.array(plax.devices()[:4]), ("x",))
    sharding = NamedSharding(mesh, P("x"))
    out = ops.segment_sum(DATA, IDS, 4, out_sharding=sharding)
    assert out.sharding == sharding
    np.testing.assert_allclose(out, reference("segment_sum", DATA, IDS, 4), rtol=1e-6)


def test_errors_name_the_argument_and_the_fix():
    with pytest.raises(ConcretizationTypeError, match="pass num_segments to segment_sum"):
        plax.jit(ops.segment_sum)(DATA, IDS)
    with pytest.raises(ConcretizationTypeError, match="`num_segments` argument"):
        plax.jit(ops.segment_sum)(DATA, IDS, 4)
    with pytest.raises(ValueError, match="num_segments must be non-negative, got -1"):
        ops.segment_sum(DATA, IDS, -1)
    with pytest.raises(ValueError, match="segment_ids is empty; pass num_segments"):
        ops.segment_sum(np.ones(0), np.zeros(0, np.int32))
    with pytest.raises(TypeError, match="segment_ids must have an integer dtype"):
        ops.segment_sum(DATA, IDS.astype(np.float32), 4)
    with pytest.raises(TypeError, match="scatter add does not accept dtype bool"):
        ops.segment_sum(np.ones(8, bool), IDS, 4)
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        ops.segment_sum(DATA, list(IDS), 4)
    with pytest.raises(ValueError, match=r"does not broadcast to .* = \(3, 2\)"):
        ops.segment_sum(DATA, np.array([0, 1, 1]), 2)
    with pytest.raises(ValueError, match="bucket_size must be a positive int"):
        ops.segment_sum(DATA, IDS, 4, bucket_size=0)


def test_grad_of_segment_prod_is_the_product_of_the_others():
    x = np.array([1.5, 3.0, 2.0, -2.0, 5.0, 0.5, 0.0, 4.0], np.float32)
    ids = np.array([0, 0, 5, -1, 2, 2, 3, 3])  # segment 3 holds a zero
    weights = np.arange(1.0, 5.0, dtype=np.float32)
    grad = plax.grad(lambda v: jnp.sum(weights * ops.segment_prod(v, ids, 4)))(x)
    # d/dx_i prod(segment) = the product of the segment's other entries, times its weight
    np.testing.assert_allclose(grad, [3.0, 1.5, 0.0, 0.0, 1.5, 15.0, 16.0, 0.0])
    check_grads(lambda v: ops.segment_prod(v, IDS, 4), (DATA,), order=2)
    check_grads(lambda v: ops.segment_prod(v, IDS, 4, bucket_size=3), (DATA,), order=1)
    # with unique ids (the case JAX differentiates) the values are JAX 0.10.2's
    ids = np.array([0, 1, 5, -1, 2, 4, 3, 6])
    grad = plax.grad(lambda v: jnp.sum(ops.segment_prod(v, ids, 7, unique_indices=True)
                                       * jnp.arange(1.0, 8.0)))(x)
    np.testing.assert_array_equal(grad, [1.0, 2.0, 6.0, 0.0, 3.0, 5.0, 4.0, 7.0])


def test_jvp_of_segment_max_averages_tied_tangents():
    x = np.array([1.0, 3.0, 2.0, 2.0, 5.0, 5.0, 0.0, 4.0], np.float32)
    ids = np.array([0, 0, 5, -1, 2, 2, 3, 3])
    tangent = np.arange(8.0, dtype=np.float32)
    out, dout = plax.jvp(lambda v: ops.segment_max(v, ids, 4), (x,), (tangent,))
    np.testing.assert_array_equal(out, [3.0, -np.inf, 5.0, 4.0])
    np.testing.assert_array_equal(dout, [1.0, 0.0, 4.5, 7.0])  # JAX 0.10.2's values
    _, dout = plax.jvp(lambda v: ops.segment_min(v, ids, 4), (x,), (tangent,))
    np.testing.assert_array_equal(dout, [0.0, 0.0, 4.5, 6.0])


def test_vmap_over_data_and_ids_together():
    x = np.array([1.5, 3.0, 2.0, -2.0, 5.0, 0.5, 0.0, 4.0], np.float32)
    ids = np.array([0, 1, 5, -1, 2, 4, 3, 6]) % 4
    out = plax.vmap(lambda d, i: ops.segment_min(d, i, 4))(np.stack([x, -x]),
                                                           np.stack([ids, ids[::-1]]))
    np.testing.assert_array_equal(out, [[0.5, 2.0, 4.0, -2.0], [-4.0, -0.5, -1.5, -5.0]])
