"""plax's core: dtypes, config, avals, primitives, traces and the jaxpr IR."""
