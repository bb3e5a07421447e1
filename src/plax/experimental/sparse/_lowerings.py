"""``jax.experimental.sparse._lowerings``: the sparse-times-dense primitives JAX hands to
cuSPARSE on GPUs, ``coo_spmv_p``/``coo_spmm_p`` (``data, row, col, x``) and
``csr_spmv_p``/``csr_spmm_p`` (``data, indices, indptr, x``), each with the matrix's
``shape`` and ``transpose``. plax computes them as its COO and CSR matvec/matmat do, with
the same rules, on every backend.
"""
from __future__ import annotations

import numpy as np

from plax.core.primitive import Primitive
from plax.experimental.sparse import coo, csr
from plax.experimental.sparse.matrix import product_rules

SUPPORTED_DATA_DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
SUPPORTED_INDEX_DTYPES = [np.int32]

_COO_BY_SHAPE = coo._LAYOUT._replace(shape_of=lambda params: params["shape"])

coo_spmv_p = Primitive("coo_spmv")
coo_spmm_p = Primitive("coo_spmm")
csr_spmv_p = Primitive("csr_spmv")
csr_spmm_p = Primitive("csr_spmm")
product_rules(coo_spmv_p, "coo_spmv", 1, _COO_BY_SHAPE)
product_rules(coo_spmm_p, "coo_spmm", 2, _COO_BY_SHAPE)
product_rules(csr_spmv_p, "csr_spmv", 1, csr._LAYOUT)
product_rules(csr_spmm_p, "csr_spmm", 2, csr._LAYOUT)
