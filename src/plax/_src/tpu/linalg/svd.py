"""``jax._src.tpu.linalg.svd``: the SVD by QDWH then eigh (``plax.lax.linalg.svd_qdwh``),
compiled as one program per set of static arguments (as JAX's is), so a repeated eager call
compiles nothing."""
from functools import partial

from plax.api.jit import jit
from plax.lax.linalg.svd_qdwh import svd_qdwh as _svd_qdwh


@partial(jit, static_argnums=(1, 2, 3, 4, 5))
def svd(a, full_matrices: bool, compute_uv: bool = True, hermitian: bool = False,
        max_iterations: int = 10, subset_by_index=None):
    """``(u, s, vh)`` (``s`` alone without ``compute_uv``) of matrix ``a``, ``s``
    descending."""
    return _svd_qdwh(a, full_matrices=full_matrices, compute_uv=compute_uv,
                     subset_by_index=subset_by_index, hermitian=hermitian,
                     max_iterations=max_iterations)
