"""plax.numpy: the NumPy API on plax arrays, written on plax.lax."""
