"""plax.experimental.sparse: sparse arrays, as ``jax.experimental.sparse``.

The BCOO (batched coordinate) format with its primitives and operations (``bcoo.py`` and
the ``bcoo_*`` modules), the format-generic ``todense``/``empty``/``eye`` (``api.py``) and the ``sparsify``
transformation that runs dense code on sparse arrays (``transform.py``), differentiation
with respect to sparse arrays (``ad.py``) and ``random_bcoo`` (``random.py``). Loaded only
when imported.
"""
from plax.experimental.sparse._base import JAXSparse
from plax.experimental.sparse.ad import grad, jacfwd, jacobian, jacrev, value_and_grad
from plax.experimental.sparse.api import empty, eye, todense, todense_p
from plax.experimental.sparse import bcoo_rules  # noqa: F401 (fills sparsify's BCOO rules)
from plax.experimental.sparse.bcoo import (
    BCOO, bcoo_broadcast_in_dim, bcoo_concatenate, bcoo_conv_general_dilated, bcoo_dot_general,
    bcoo_dot_general_p, bcoo_dot_general_sampled, bcoo_dot_general_sampled_p,
    bcoo_dynamic_slice, bcoo_eliminate_zeros, bcoo_extract, bcoo_extract_p, bcoo_fromdense,
    bcoo_fromdense_p, bcoo_gather, bcoo_multiply_dense, bcoo_multiply_sparse, bcoo_reduce_sum,
    bcoo_reshape, bcoo_rev, bcoo_slice, bcoo_sort_indices, bcoo_sort_indices_p,
    bcoo_spdot_general_p, bcoo_squeeze, bcoo_sum_duplicates, bcoo_sum_duplicates_p,
    bcoo_todense, bcoo_todense_p, bcoo_transpose, bcoo_transpose_p, bcoo_update_layout)
from plax.experimental.sparse.random import random_bcoo
from plax.experimental.sparse.transform import SparseTracer, sparsify
from plax.experimental.sparse.util import (CuSparseEfficiencyWarning, SparseEfficiencyError,
                                           SparseEfficiencyWarning)

__all__ = [
    "JAXSparse", "BCOO", "empty", "eye", "todense", "todense_p", "sparsify", "random_bcoo",
    "grad", "value_and_grad", "jacfwd", "jacrev", "jacobian",
    "bcoo_dot_general", "bcoo_dot_general_p", "bcoo_eliminate_zeros", "bcoo_extract",
    "bcoo_extract_p", "bcoo_fromdense", "bcoo_fromdense_p", "bcoo_multiply_dense",
    "bcoo_multiply_sparse", "bcoo_reduce_sum", "bcoo_sort_indices", "bcoo_sort_indices_p",
    "bcoo_sum_duplicates", "bcoo_sum_duplicates_p", "bcoo_todense", "bcoo_todense_p",
    "bcoo_transpose", "bcoo_transpose_p", "CuSparseEfficiencyWarning", "SparseEfficiencyError",
    "SparseEfficiencyWarning", "SparseTracer", "bcoo_broadcast_in_dim", "bcoo_concatenate",
    "bcoo_conv_general_dilated", "bcoo_dot_general_sampled", "bcoo_dot_general_sampled_p",
    "bcoo_dynamic_slice", "bcoo_gather", "bcoo_reshape", "bcoo_rev", "bcoo_slice",
    "bcoo_spdot_general_p", "bcoo_squeeze", "bcoo_update_layout",
]

# The other formats' names, loaded with their modules on first use: name -> module.
_FORMAT_NAMES = {
    **{name: "bcsr" for name in (
        "BCSR", "bcsr_broadcast_in_dim", "bcsr_concatenate", "bcsr_dot_general",
        "bcsr_dot_general_p", "bcsr_extract", "bcsr_extract_p", "bcsr_fromdense",
        "bcsr_fromdense_p", "bcsr_sum_duplicates", "bcsr_todense", "bcsr_todense_p")},
    **{name: "coo" for name in (
        "COO", "coo_fromdense", "coo_fromdense_p", "coo_matmat", "coo_matmat_p", "coo_matvec",
        "coo_matvec_p", "coo_todense", "coo_todense_p")},
    **{name: "csr" for name in (
        "CSR", "CSC", "csr_fromdense", "csr_fromdense_p", "csr_matmat", "csr_matmat_p",
        "csr_matvec", "csr_matvec_p", "csr_todense", "csr_todense_p")},
}


# Submodules loaded on first use, attributes of the package as in JAX (jesp.linalg.lobpcg_...).
_LAZY_SUBMODULES = frozenset({"linalg", "bcsr", "coo", "csr"})


def __getattr__(name):
    import importlib
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _FORMAT_NAMES:
        value = getattr(importlib.import_module(f"{__name__}.{_FORMAT_NAMES[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
