"""plax.stages: the ahead-of-time stages of a jitted function (JAX's ``jax.stages``)."""
from plax.api.stages import ArgInfo, Compiled, Lowered, Traced, Wrapped  # noqa: F401

from typing import Union as _Union

# XLA compiler options, as ``jit(..., compiler_options=...)`` takes them.
CompilerOptions = dict[str, _Union[str, bool]]
