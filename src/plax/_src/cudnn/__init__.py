"""``jax._src.cudnn``: what JAX's cuDNN attention module answers about this machine."""
