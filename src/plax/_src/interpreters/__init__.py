"""``jax._src.interpreters``: the interpreter modules libraries import by this path."""
