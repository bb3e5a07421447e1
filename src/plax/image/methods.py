"""ResizeMethod and the interpolation kernels each method weighs input pixels with.

A kernel takes ``x``, the distance between an output sample and an input pixel centre in
(scaled) input pixels, always ``>= 0``, and returns that pixel's unnormalised weight.
"""
from __future__ import annotations

import enum

import numpy as np

from plax import numpy as jnp


class ResizeMethod(enum.Enum):
    """How :func:`plax.image.resize` and :func:`scale_and_translate` sample the input.

    NEAREST: the nearest input pixel. LINEAR: a triangle filter. LANCZOS3 / LANCZOS5:
    windowed sinc of radius 3 / 5. CUBIC: Keys' cubic (a = -0.5). CUBIC_PYTORCH: PyTorch's
    bicubic (Keys' cubic with a = -0.75 and edge pixels repeated when ``antialias`` is
    off; CUBIC when it is on). AREA: each output pixel averages the input area it covers.
    """

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> "ResizeMethod":
        """The method a string names (``"bilinear"``, ``"lanczos3"``, ...)."""
        method = _NAMES.get(s) if isinstance(s, str) else None
        if method is None:
            raise ValueError(f'Unknown resize method "{s}"; known names: '
                             f'{", ".join(sorted(_NAMES))}.')
        return method


_NAMES = {
    "nearest": ResizeMethod.NEAREST,
    "linear": ResizeMethod.LINEAR, "bilinear": ResizeMethod.LINEAR,
    "trilinear": ResizeMethod.LINEAR, "triangle": ResizeMethod.LINEAR,
    "lanczos3": ResizeMethod.LANCZOS3, "lanczos5": ResizeMethod.LANCZOS5,
    "cubic": ResizeMethod.CUBIC, "bicubic": ResizeMethod.CUBIC, "tricubic": ResizeMethod.CUBIC,
    "cubic-pytorch": ResizeMethod.CUBIC_PYTORCH, "bicubic-pytorch": ResizeMethod.CUBIC_PYTORCH,
    "area": ResizeMethod.AREA,
}


def as_method(method) -> ResizeMethod:
    if isinstance(method, ResizeMethod):
        return method
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    raise TypeError(f"method must be a ResizeMethod or one of its names (a str), got "
                    f"{method!r}.")


def triangle(x):
    return jnp.maximum(0, 1 - jnp.abs(x))


def _cubic(a):
    """Keys' piecewise cubic with parameter ``a``: 1 at 0, 0 at the integers, 0 from 2."""
    def kernel(x):
        near = ((a + 2) * x - (a + 3)) * x * x + 1
        far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return jnp.where(x >= 2, 0.0, jnp.where(x >= 1, far, near))
    return kernel


def _lanczos(radius):
    """sinc(x) sinc(x / radius) inside the radius; 1 for |x| <= 1e-3, where the quotient
    loses its digits."""
    def kernel(x):
        numerator = radius * jnp.sin(np.pi * x) * jnp.sin(np.pi * x / radius)
        safe = jnp.where(x != 0, (np.pi ** 2) * x * x, 1)
        value = jnp.where(x > 1e-3, numerator / safe, 1)
        return jnp.where(x > radius, 0.0, value)
    return kernel


AREA = object()  # the AREA method weighs by overlap, not by a kernel of the distance

# method -> (the kernel's radius in input pixels, the kernel)
KERNELS = {
    ResizeMethod.LINEAR: (1, triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _cubic(-0.5)),
    ResizeMethod.CUBIC_PYTORCH: (2, _cubic(-0.75)),
    ResizeMethod.AREA: (1, AREA),
}
