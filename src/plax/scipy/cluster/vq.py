"""plax.scipy.cluster.vq: assigning observations to their nearest code."""
from __future__ import annotations

from plax import numpy as jnp
from plax.numpy.util import check_arraylike, promote_dtypes_inexact

__all__ = ["vq"]


def vq(obs, code_book, check_finite: bool = True):
    """``(code, dist)``: for each row of ``obs`` (M, N) the index of the nearest row of
    ``code_book`` (K, N) in Euclidean distance, and that distance. 1-D inputs are scalar
    observations and codes. ``check_finite`` is accepted and unused, as in JAX."""
    del check_finite
    check_arraylike("scipy.cluster.vq.vq", obs, code_book)
    obs, code_book = promote_dtypes_inexact(obs, code_book)
    if obs.ndim != code_book.ndim:
        raise ValueError(f"vq: Observation and code_book should have the same rank; got obs "
                         f"of shape {obs.shape} and code_book of shape {code_book.shape}.")
    if obs.ndim == 1:
        obs, code_book = obs[:, None], code_book[:, None]
    if obs.ndim != 2:
        raise ValueError(f"vq: ndim different than 1 or 2 are not supported; got obs of "
                         f"shape {obs.shape} (pass (M, N) observations and (K, N) codes).")
    dist = jnp.linalg.norm(obs[:, None, :] - code_book[None, :, :], axis=-1)
    code = jnp.argmin(dist, axis=-1)
    return code, jnp.take_along_axis(dist, code[:, None], axis=-1)[:, 0]
