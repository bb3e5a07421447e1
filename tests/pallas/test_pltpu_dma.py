"""pltpu's DMAs and semaphores in interpret mode: HBM/ANY inputs copied into VMEM scratch by
make_async_copy (single and double buffered over a grid), semaphore counters, and the
errors JAX gives, against numpy references."""
import functools
import warnings

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import pallas as pl
from plax.experimental.pallas import tpu as pltpu
from plax import lax
from plax.experimental.shard_map import shard_map
from plax.pallas.semaphores import (DeviceIdType, semaphore_read, semaphore_signal,
                                    semaphore_wait)
from plax.sharding import Mesh, PartitionSpec

call = functools.partial(pl.pallas_call, interpret=True)
ANY_SPEC = pl.BlockSpec(memory_space=pl.ANY)


def _x(rows=32, cols=128):
    return np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) / 3


def _sds(shape, dtype=jnp.float32):
    return plax.ShapeDtypeStruct(shape, dtype)


@pytest.mark.parametrize("space", [pl.ANY, pltpu.HBM])
def test_hbm_input_copied_to_vmem_per_grid_step(space):
    def kernel(x_hbm, o_ref, buf, sem):
        rows = pl.ds(pl.program_id(0) * 8, 8)
        copy = pltpu.make_async_copy(x_hbm.at[rows], buf, sem)
        copy.start()
        copy.wait()
        o_ref[...] = buf[...] + 1
    x = _x()
    f = call(kernel, out_shape=_sds(x.shape), grid=(4,),
             in_specs=[pl.BlockSpec(memory_space=space)],
             out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
             scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA])
    np.testing.assert_array_equal(f(x), x + 1)


def test_double_buffered_copies_over_a_grid():
    """Step i waits for block i (started by step i - 1, or by itself at i = 0) and starts
    block i + 1 into the other slot: the pattern of JAX's manual double buffering."""
    nblocks = 4

    def kernel(x_hbm, o_ref, bufs, sems):
        i = pl.program_id(0)
        slot = i % 2

        def copy(block, s):
            return pltpu.make_async_copy(x_hbm.at[pl.ds(block * 8, 8), :], bufs.at[s],
                                         sems.at[s])

        @pl.when(i == 0)
        def _():
            copy(0, 0).start()

        @pl.when(i + 1 < nblocks)
        def _():
            copy(i + 1, 1 - slot).start()
        copy(i, slot).wait()
        o_ref[...] = bufs[slot] * 2
    x = _x()
    f = call(kernel, out_shape=_sds(x.shape), grid=(nblocks,), in_specs=[ANY_SPEC],
             out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
             scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                             pltpu.SemaphoreType.DMA((2,))])
    np.testing.assert_array_equal(f(x), 2 * x)
    assert "dma_start(p0)" in str(plax.make_jaxpr(f)(x))


def test_copy_from_vmem_to_hbm_output_and_async_copy():
    def kernel(x_ref, o_hbm, sem):
        pltpu.async_copy(x_ref.at[:, pl.ds(0, 64)], o_hbm.at[:, pl.ds(64, 64)], sem).wait()
        pltpu.async_copy(x_ref.at[:, pl.ds(64, 64)], o_hbm.at[:, pl.ds(0, 64)], sem).wait()
    x = _x(8, 128)
    f = call(kernel, out_shape=_sds(x.shape), out_specs=ANY_SPEC,
             scratch_shapes=[pltpu.SemaphoreType.DMA])
    np.testing.assert_array_equal(f(x), np.roll(x, 64, axis=1))


def test_sync_copy_and_accumulating_start():
    def kernel(x_hbm, o_ref, sem):
        pltpu.sync_copy(x_hbm, o_ref)
        copy = pltpu.make_async_copy(x_hbm, o_ref, sem)
        copy.start(add=True)
        copy.wait()
        pltpu.sync_copy(x_hbm.at[0], o_ref.at[1], add=True)
    x = _x(4, 128)
    f = call(kernel, out_shape=_sds(x.shape), in_specs=[ANY_SPEC],
             scratch_shapes=[pltpu.SemaphoreType.DMA])
    want = 2 * x
    want[1] += x[0]
    np.testing.assert_array_equal(f(x), want)


def test_dma_semaphore_counts_elements_until_waited():
    def kernel(x_ref, o_ref, buf, sem):
        copy = pltpu.make_async_copy(x_ref, buf, sem)
        copy.start()
        o_ref[0] = semaphore_read(sem)
        copy.wait()
        o_ref[1] = semaphore_read(sem)
        copy.wait()  # (nothing pending: the counter goes below zero, nothing blocks)
        o_ref[2] = semaphore_read(sem)
    out = call(kernel, out_shape=_sds((3,), jnp.int32),
               in_specs=[ANY_SPEC], out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
               scratch_shapes=[pltpu.VMEM((8, 16), jnp.float32),
                               pltpu.SemaphoreType.DMA])(_x(8, 16))
    np.testing.assert_array_equal(out, [128, 0, -128])


def test_regular_semaphores_signal_wait_read():
    def kernel(o_ref, sems):
        semaphore_signal(sems.at[1], 3)
        semaphore_signal(sems.at[0])
        semaphore_wait(sems.at[1], 2)
        o_ref[0] = semaphore_read(sems.at[0])
        o_ref[1] = semaphore_read(sems.at[1])
        semaphore_wait(sems.at[1], 1, decrement=False)
        o_ref[2] = semaphore_read(sems.at[1])
    out = call(kernel, out_shape=_sds((3,), jnp.int32),
               out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
               scratch_shapes=[pltpu.SemaphoreType.REGULAR((2,))])()
    np.testing.assert_array_equal(out, [1, 1, 1])


def test_semaphores_start_at_zero_in_every_call_and_carry_across_steps():
    def kernel(o_ref, sem):
        semaphore_signal(sem, pl.program_id(0) + 1)
        o_ref[0, 0] = semaphore_read(sem)
    f = call(kernel, out_shape=_sds((4, 1), jnp.int32), grid=(4,),
             out_specs=pl.BlockSpec((1, 1), lambda i: (i, 0)),
             scratch_shapes=[pltpu.SemaphoreType.REGULAR])
    np.testing.assert_array_equal(f()[:, 0], [1, 3, 6, 10])
    np.testing.assert_array_equal(f()[:, 0], [1, 3, 6, 10])


def test_semaphore_types_and_dtypes():
    ref = pltpu.SemaphoreType.DMA((2,))
    assert ref.shape == (2,) and ref.memory_space is pltpu.SEMAPHORE
    assert plax.numpy.issubdtype(ref.dtype, pltpu.dma_semaphore)
    assert pltpu.SemaphoreType.REGULAR.get_ref_aval().shape == ()
    assert str(pltpu.SemaphoreType.BARRIER.dtype) == "barrier_semaphore"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert pltpu.semaphore_signal is semaphore_signal
    assert "pl.semaphore_signal" in str(seen[0].message)


@pytest.mark.parametrize("body, message", [
    (lambda x, o, buf, sem, rsem: pltpu.make_async_copy(x, buf, rsem).wait(),
     "dma_wait requires a DMA semaphore"),
    (lambda x, o, buf, sem, rsem: semaphore_wait(sem),
     "Must wait semaphores of the following types"),
    (lambda x, o, buf, sem, rsem: semaphore_signal(x.at[0, 0]),
     "Must signal semaphores of the following types"),
    (lambda x, o, buf, sem, rsem: pltpu.make_async_copy(x.at[0], buf, sem),
     "must have the same shape and dtype"),
    (lambda x, o, buf, sem, rsem: pltpu.make_async_remote_copy(
        x, buf, sem, sem, device_id=1).start(), "inside a shard_map"),
])
def test_errors(body, message):
    def kernel(x, o, buf, sem, rsem):
        body(x, o, buf, sem, rsem)
        o[...] = buf[...]
    f = call(kernel, out_shape=_sds((8, 128)), in_specs=[ANY_SPEC],
             scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA,
                             pltpu.SemaphoreType.REGULAR])
    with pytest.raises((ValueError, NotImplementedError), match=message):
        f(_x(8, 128))


def test_semaphore_outside_a_kernel_is_refused():
    with pytest.raises(ValueError, match="takes a Ref"):
        pltpu.make_async_copy(np.zeros(3), np.zeros(3), None)


@pytest.mark.parametrize("device_id_type", [DeviceIdType.MESH, DeviceIdType.LOGICAL])
def test_remote_copies_and_signals_under_shard_map(device_id_type):
    """Each device sends its block to its right neighbour on the ring and signals it."""
    n = 4
    if plax.device_count() < n:
        pytest.skip(f"needs {n} devices")

    def kernel(x_ref, o_ref, counts_ref, send, recv, sig):
        me = lax.axis_index("x")
        right = lax.rem(me + 1, n)
        target = (right,) if device_id_type is DeviceIdType.MESH else right
        copy = pltpu.make_async_remote_copy(x_ref, o_ref, send, recv, device_id=target,
                                            device_id_type=device_id_type)
        copy.start()
        semaphore_signal(sig, me + 1, device_id=target, device_id_type=device_id_type)
        counts_ref[0] = semaphore_read(recv)
        counts_ref[1] = semaphore_read(sig)
        copy.wait()
        counts_ref[2] = semaphore_read(send) + semaphore_read(recv)

    def per_device(x):
        return call(kernel, out_shape=(_sds(x.shape), _sds((3,), jnp.int32)),
                    in_specs=[ANY_SPEC],
                    out_specs=(ANY_SPEC, pl.BlockSpec(memory_space=pltpu.SMEM)),
                    scratch_shapes=[pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA,
                                    pltpu.SemaphoreType.REGULAR])(x)
    mesh = Mesh(np.array(plax.devices()[:n]), ("x",))
    ring = plax.jit(shard_map(per_device, mesh=mesh, in_specs=PartitionSpec("x"),
                              out_specs=PartitionSpec("x"), check_rep=False))
    x = _x(n * 8, 128)
    y, counts = ring(x)
    np.testing.assert_array_equal(y, np.roll(x.reshape(n, 8, 128), 1, axis=0).reshape(x.shape))
    np.testing.assert_array_equal(np.asarray(counts).reshape(n, 3),
                                  [[1024, (i - 1) % n + 1, 0] for i in range(n)])


def test_copies_inside_run_state_touch_kernel_references():
    """The run_state body's own buffer is discharged first, the kernel's references later."""
    def kernel(x_hbm, o_ref, sem):
        def body(refs):
            (buf,) = refs
            pltpu.async_copy(x_hbm.at[pl.ds(8, 8)], buf, sem).wait()
            pltpu.async_copy(buf, o_ref, sem).wait()
            o_ref[0, 0] = semaphore_read(sem).astype(jnp.float32)
        pl.run_state(body)((jnp.zeros((8, 128), jnp.float32),))
    x = _x(16, 128)
    out = call(kernel, out_shape=_sds((8, 128)), in_specs=[ANY_SPEC],
               scratch_shapes=[pltpu.SemaphoreType.DMA])(x)
    want = x[8:].copy()
    want[0, 0] = 0
    np.testing.assert_array_equal(out, want)
