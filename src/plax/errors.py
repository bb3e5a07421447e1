"""plax.errors: the exceptions a user can meet (as ``jax.errors``)."""
from plax.core.errors import (  # noqa: F401
    ConcretizationTypeError, InconclusiveDimensionOperation, JAXIndexError, JAXTypeError,
    KeyReuseError, NonConcreteBooleanIndexError, TracerArrayConversionError,
    TracerBoolConversionError, TracerIntegerConversionError, UnexpectedTracerError)
from plax.core.jaxpr import JaxprTypeError  # noqa: F401
from plax.runtime.xla import JaxRuntimeError  # jaxlib's class, what XLA raises

JaxRuntimeError.__module__ = "plax.errors"  # as JAX names it "jax.errors"

__all__ = ["ConcretizationTypeError", "InconclusiveDimensionOperation", "JAXIndexError",
           "JAXTypeError", "JaxRuntimeError", "JaxprTypeError", "KeyReuseError",
           "NonConcreteBooleanIndexError", "TracerArrayConversionError",
           "TracerBoolConversionError", "TracerIntegerConversionError", "UnexpectedTracerError"]
