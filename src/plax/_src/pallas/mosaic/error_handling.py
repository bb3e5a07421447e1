"""``jax._src.pallas.mosaic.error_handling``: the errors Pallas re-raises from Mosaic."""


class MosaicError(Exception):
    """An error of the Mosaic compiler or of a Mosaic kernel at run time, re-raised."""


class VerificationError(MosaicError):
    """A Mosaic module that failed MLIR verification."""
