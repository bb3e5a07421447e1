"""``jax._src.scipy.sparse.linalg``: ``plax.scipy.sparse.linalg`` (cg, bicgstab, gmres), and
``_kth_arnoldi_iteration``, one step of GMRES's Arnoldi process
(``plax.scipy.sparse.gmres_arnoldi``)."""
from plax.scipy.sparse import linalg as _public
from plax.scipy.sparse.gmres_arnoldi import _arnoldi_step

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _public)


def _kth_arnoldi_iteration(k, A, M, V, H):
    """Extend the Krylov basis ``V`` by its ``k+1``-th vector and fill row ``k`` of ``H``:
    ``(V, H, breakdown)``."""
    return _arnoldi_step(k, A, M, V, H, H.dtype)
