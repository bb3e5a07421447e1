"""``jax.experimental.sparse._lowerings``: the sparse-times-dense primitives JAX hands to
cuSPARSE on GPUs, ``coo_spmv_p``/``coo_spmm_p`` (``data, row, col, x``; the very primitives
``bcoo`` uses, as in JAX) and ``csr_spmv_p``/``csr_spmm_p`` (``data, indices, indptr, x``),
each with the matrix's ``shape`` and ``transpose``. plax computes them on plax operations,
with the rules of its COO and CSR products, on every backend.
"""
from __future__ import annotations

import numpy as np

from plax.core.primitive import Primitive
from plax.experimental.sparse import csr
from plax.experimental.sparse.bcoo_spdot import coo_spmm_p, coo_spmv_p  # noqa: F401
from plax.experimental.sparse.matrix import product_rules

SUPPORTED_DATA_DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
SUPPORTED_INDEX_DTYPES = [np.int32]

csr_spmv_p = Primitive("csr_spmv")
csr_spmm_p = Primitive("csr_spmm")
product_rules(csr_spmv_p, "csr_spmv", 1, csr._LAYOUT)
product_rules(csr_spmm_p, "csr_spmm", 2, csr._LAYOUT)
