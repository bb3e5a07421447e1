"""plax.experimental.mosaic.gpu, as ``jax.experimental.mosaic.gpu``: Mosaic GPU's kernel
builder. plax has no GPU backend; what is here is what code shared with other backends names
(``core.artificial_shared_memory_limit``, ``LoweringSemantics``)."""
from plax.experimental.mosaic.gpu import core
from plax.experimental.mosaic.gpu.core import LoweringSemantics

__all__ = ["core", "LoweringSemantics"]
