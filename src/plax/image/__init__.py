"""plax.image: resizing and resampling images (JAX's ``jax.image``)."""
from plax.image.methods import ResizeMethod
from plax.image.resize import resize, scale_and_translate

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]
