"""The Pallas room: what kernels need beyond the kernel language's face.

The public faces are ``plax.experimental.pallas`` (pl) and ``plax.experimental.pallas.tpu``
(pltpu); ``pallas_call_p`` itself is a higher-order primitive (``higher_order/pallas_call``).
This package holds the TPU kernel primitives (DMA, semaphores, ...) and the Mosaic lowering:
a kernel jaxpr turned into a Mosaic module inside a ``tpu_custom_call``.

The TPU kernel primitives, each with abstract evaluation, printing and an interpret-mode rule
(a discharge rule, or lax ops), for a Mosaic lowering to add its rule to:

- ``semaphores``: semaphore dtypes (int32 counters) and ``semaphore_signal_p`` /
  ``semaphore_wait_p`` / ``semaphore_read_p``;
- ``dma``: ``dma_start_p`` / ``dma_wait_p`` and the copy descriptors; ``remote``: remote
  copies and signals between the devices of a ``shard_map`` in interpret mode;
- ``tpu_ops``: ``roll_p``, ``bitcast_p``; ``tpu_packing``: ``pack_elementwise_p``,
  ``unpack_elementwise_p``, ``stochastic_round_p``, ``touch_p``;
- helpers over them: ``pipeline`` (emit_pipeline), ``einshape``, ``tpu_info``,
  ``interpret_mode`` (forced TPU interpret mode).
"""
