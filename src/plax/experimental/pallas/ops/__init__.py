"""plax.experimental.pallas.ops, as ``jax.experimental.pallas.ops``: kernels written with
plax's Pallas (the TPU ones under ``ops.tpu``)."""
