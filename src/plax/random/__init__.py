"""plax.random: counter-based pseudo-random numbers (Threefry-2x32), bit for bit as JAX's.

Keys are ``uint32[2]`` arrays made by ``PRNGKey``; ``split`` and ``fold_in`` derive
new ones, and the samplers turn a key into values. The layout of the bits follows
the flag ``jax_threefry_partitionable`` (on by default, as in JAX).
"""
from plax.random.samplers import PRNGKey, bits, fold_in, normal, split, uniform

__all__ = ["PRNGKey", "split", "fold_in", "bits", "uniform", "normal"]
