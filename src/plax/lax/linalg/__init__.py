"""plax.lax.linalg: linear-algebra primitives (factorisations, reductions and solves).

On CPU the factorisations and reductions lower to jaxlib's LAPACK kernels (``lapack.py``);
cholesky_update, symmetric_product and lu_pivots_to_permutation are plax programs, and qdwh
an ordinary function built on qr and cholesky. One file per family.
"""
from plax.lax.linalg.triangular import triangular_solve, triangular_solve_p  # noqa: F401
from plax.lax.linalg.cholesky import cholesky, cholesky_p  # noqa: F401
from plax.lax.linalg.lu import (lu, lu_p, lu_pivots_to_permutation,  # noqa: F401
                                lu_pivots_to_permutation_p)
from plax.lax.linalg.qr import qr, qr_p, householder_product, householder_product_p  # noqa: F401
from plax.lax.linalg.geqrf import geqrf, geqrf_p  # noqa: F401
from plax.lax.linalg.tridiagonal import tridiagonal_solve, tridiagonal_solve_p  # noqa: F401
from plax.lax.linalg.eigh import EighImplementation, eigh, eigh_p  # noqa: F401
from plax.lax.linalg.svd import svd, svd_p, SvdAlgorithm  # noqa: F401
from plax.lax.linalg.eig import EigImplementation, eig, eig_p  # noqa: F401
from plax.lax.linalg.schur import schur, schur_p  # noqa: F401
from plax.lax.linalg.hessenberg import hessenberg, hessenberg_p  # noqa: F401
from plax.lax.linalg.tridiagonal_reduction import tridiagonal, tridiagonal_p  # noqa: F401
from plax.lax.linalg.ormqr import ormqr, ormqr_p  # noqa: F401
from plax.lax.linalg.cholesky_update import cholesky_update, cholesky_update_p  # noqa: F401
from plax.lax.linalg.symmetric_product import symmetric_product, symmetric_product_p  # noqa: F401
from plax.lax.linalg.qdwh import qdwh  # noqa: F401
from plax.lax.linalg import eigh_tpu, svd_qdwh  # noqa: F401  (TPU lowerings of eigh, svd)
