"""``jax._src.dispatch``: waiting for the effects of programs already issued."""
from plax.runtime.tokens import barrier as wait_for_tokens  # noqa: F401
