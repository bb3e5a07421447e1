"""The Pallas room: what kernels need beyond the kernel language's face.

The public faces are ``plax.experimental.pallas`` (pl) and ``plax.experimental.pallas.tpu``
(pltpu); ``pallas_call_p`` itself is a higher-order primitive (``higher_order/pallas_call``).
This package holds the TPU kernel primitives (DMA, semaphores, ...) and the Mosaic lowering:
a kernel jaxpr turned into a Mosaic module inside a ``tpu_custom_call``.
"""
