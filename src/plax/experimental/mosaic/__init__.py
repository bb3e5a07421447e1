"""plax.experimental.mosaic, as ``jax.experimental.mosaic``: Mosaic's GPU package
(``gpu``), as far as Pallas's tests and multi-backend kernels name it."""
