"""plax.experimental.pallas.ops.tpu, as ``jax.experimental.pallas.ops.tpu``: TPU kernels
written with plax's Pallas: ``flash_attention``, ``matmul``, ``example_kernel``, ``megablox``
(grouped matmuls), ``paged_attention``, ``ragged_paged_attention``, ``splash_attention``
(block-sparse attention: kernel, masks, mask info), ``all_gather`` (a ring of remote DMAs)
and ``random`` (Threefry and Philox kernels registered as PRNG implementations).

Each kernel compiles for the TPU when the default backend is a TPU, and runs in interpret
mode on any other backend (the CPU), where no Mosaic compiler exists. The modules import only
public faces (plax, plax.numpy, plax.lax, pl, pltpu and each other): the same source runs on
JAX with the names spelled ``jax`` (bench/bench_pallas.py times it so).
"""
