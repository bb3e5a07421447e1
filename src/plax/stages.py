"""plax.stages: the ahead-of-time stages of a jitted function (JAX's ``jax.stages``)."""
from plax.api.stages import Compiled, Lowered, Traced  # noqa: F401
