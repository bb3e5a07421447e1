"""plax.lax.linalg: linear-algebra primitives (factorisations and triangular solves).

On CPU each lowers to jaxlib's LAPACK kernels (``lapack.py``). One file per family.
"""
from plax.lax.linalg.triangular import triangular_solve, triangular_solve_p  # noqa: F401
from plax.lax.linalg.cholesky import cholesky, cholesky_p  # noqa: F401
