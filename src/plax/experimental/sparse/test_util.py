"""``jax.experimental.sparse.test_util``: what JAX's sparse tests build on.

``SparseTestCase`` (a JaxTestCase checking sparse operations against their dense versions,
under jit, differentiation and vmap), generators of random BCOO/BCSR arrays and of dense
arrays with zeros (``rand_bcoo``, ``rand_bcsr``, ``rand_sparse``: JAX's draws, in JAX's
order) and the layouts tests iterate over.
"""
from __future__ import annotations

import functools
import itertools
import math
from typing import NamedTuple

import numpy as np

import plax
import plax.numpy as jnp
from plax import lax, tree_util
from plax._src import test_util as jtu
from plax.experimental.sparse._base import JAXSparse
from plax.experimental.sparse.api import todense
from plax.experimental.sparse.bcoo import BCOO
from plax.experimental.sparse.bcsr import BCSR
from plax.experimental.sparse.transform import sparsify

# Tolerances of sparse products, which sum in another order than dense ones.
MATMUL_TOL = {np.float32: 1e-5, np.float64: 1e-10, np.complex64: 1e-5, np.complex128: 1e-10}


def is_sparse(x) -> bool:
    """Whether ``x`` is a sparse array."""
    return isinstance(x, JAXSparse)


class BatchedDotGeneralProperties(NamedTuple):
    """A batched dot_general case: operand shapes, the sparse operand's layout and the
    dimension numbers."""
    lhs_shape: tuple
    rhs_shape: tuple
    n_batch: int
    n_dense: int
    dimension_numbers: tuple


class SparseLayout(NamedTuple):
    """How many leading batch, trailing dense and middle sparse dimensions."""
    n_batch: int
    n_dense: int
    n_sparse: int


def _densify(tree):
    return tree_util.tree_map(todense, tree, is_leaf=is_sparse)


class SparseTestCase(jtu.JaxTestCase):
    """JaxTestCase with checks of sparse operations against dense ones."""

    def assertSparseArraysEquivalent(self, x, y, *, check_dtypes=True, atol=None, rtol=None,
                                     canonicalize_dtypes=True, err_msg=""):
        """The same structure (sparse layouts included) and close buffers."""
        x_bufs, x_tree = tree_util.tree_flatten(x)
        y_bufs, y_tree = tree_util.tree_flatten(y)
        self.assertEqual(x_tree, y_tree)
        self.assertAllClose(x_bufs, y_bufs, check_dtypes=check_dtypes, atol=atol, rtol=rtol,
                            canonicalize_dtypes=canonicalize_dtypes, err_msg=err_msg)

    def _CheckAgainstDense(self, dense_op, sparse_op, args_maker, check_jit=True,
                           check_dtypes=True, tol=None, atol=None, rtol=None,
                           canonicalize_dtypes=True):
        """``sparse_op`` on sparse arguments equals ``dense_op`` on their dense forms (and
        under jit, the same sparse result)."""
        sparse_args = args_maker()
        expected = dense_op(*_densify(sparse_args))
        sparse_ans = sparse_op(*sparse_args)
        self.assertAllClose(expected, _densify(sparse_ans), check_dtypes=check_dtypes,
                            atol=atol or tol, rtol=rtol or tol,
                            canonicalize_dtypes=canonicalize_dtypes)
        if check_jit:
            jitted = plax.jit(sparse_op)(*sparse_args)
            self.assertSparseArraysEquivalent(sparse_ans, jitted, atol=atol or tol,
                                              rtol=rtol or tol)

    def _CheckGradsSparse(self, dense_fun, sparse_fun, args_maker, *, argnums=None,
                          modes=("fwd", "rev"), atol=None, rtol=None):
        """Jacobians (reverse and/or forward) with respect to the arguments' buffers agree
        between the dense and the sparse function."""
        assert all(mode in ["fwd", "rev"] for mode in modes)
        args = args_maker()
        args_flat, tree = tree_util.tree_flatten(args)
        num_bufs = [len(tree_util.tree_flatten(arg)[0]) for arg in args]
        argnums_flat = np.cumsum([0, *num_bufs[:-1]]).tolist()
        if argnums is not None:
            argnums_flat = [argnums_flat[n] for n in argnums]

        def dense_fun_flat(*flat):
            return dense_fun(*_densify(tree_util.tree_unflatten(tree, flat)))

        def sparse_fun_flat(*flat):
            return _densify(sparse_fun(*tree_util.tree_unflatten(tree, flat)))
        for mode, jac in (("rev", plax.jacrev), ("fwd", plax.jacfwd)):
            if mode in modes:
                self.assertAllClose(jac(dense_fun_flat, argnums=argnums_flat)(*args_flat),
                                    jac(sparse_fun_flat, argnums=argnums_flat)(*args_flat),
                                    atol=atol, rtol=rtol)

    def _random_bdims(self, *args):
        rng = self.rng()
        return [rng.randint(0, arg + 1) for arg in args]

    def _CheckBatchingSparse(self, dense_fun, sparse_fun, args_maker, *, batch_size=3,
                             bdims=None, check_jit=False, check_dtypes=True, tol=None,
                             atol=None, rtol=None, canonicalize_dtypes=True):
        """vmap of the sparse function over stacked sparse arguments equals vmap of the dense
        one (batch dimensions drawn at random unless given)."""
        if bdims is None:
            bdims = self._random_bdims(*(arg.n_batch if is_sparse(arg) else arg.ndim
                                         for arg in args_maker()))

        def concat(args, bdim):
            return sparsify(functools.partial(lax.concatenate, dimension=bdim))(args)

        def expand(arg, bdim):
            return sparsify(functools.partial(lax.expand_dims, dimensions=[bdim]))(arg)

        def batched_args_maker():
            groups = list(zip(*(args_maker() for _ in range(batch_size))))
            if len(groups) != len(bdims):
                raise ValueError(f"{len(groups)} arguments but {len(bdims)} batch dims")
            return [group[0] if bdim is None else concat([expand(x, bdim) for x in group], bdim)
                    for group, bdim in zip(groups, bdims)]
        self._CheckAgainstDense(plax.vmap(dense_fun, bdims), plax.vmap(sparse_fun, bdims),
                                batched_args_maker, check_dtypes=check_dtypes, tol=tol,
                                atol=atol, rtol=rtol, check_jit=check_jit,
                                canonicalize_dtypes=canonicalize_dtypes)


def _rand_sparse(shape, dtype, *, rng, rand_method, nse, n_batch, n_dense, sparse_format):
    if sparse_format not in ["bcoo", "bcsr"]:
        raise ValueError(f"Sparse format {sparse_format} not supported.")
    n_sparse = len(shape) - n_batch - n_dense
    if n_sparse < 0 or n_batch < 0 or n_dense < 0:
        raise ValueError(f"Invalid parameters: {shape=} {n_batch=} {n_sparse=}")
    if sparse_format == "bcsr" and n_sparse != 2:
        raise ValueError(f"bcsr array must have 2 sparse dimensions; {n_sparse} is given.")
    dims = list(shape)
    batch_shape = dims[:n_batch]
    sparse_shape = dims[n_batch:n_batch + n_sparse]
    dense_shape = dims[n_batch + n_sparse:]
    if 0 <= nse < 1:
        nse = int(np.ceil(nse * np.prod(sparse_shape)))
    nse = int(nse)
    data = jnp.array(rand_method(rng)((*batch_shape, nse, *dense_shape), dtype))
    int32 = np.dtype("int32")
    if sparse_format == "bcoo":
        indices = jnp.array(rng.randint(0, sparse_shape, size=(*batch_shape, nse, n_sparse),
                                        dtype=int32))
        return BCOO((data, indices), shape=shape)
    indices = jnp.array(rng.randint(0, sparse_shape[1], size=(*batch_shape, nse), dtype=int32))
    indptr = jnp.sort(rng.randint(0, nse + 1, size=(*batch_shape, sparse_shape[0] + 1),
                                  dtype=int32), axis=-1)
    indptr = indptr.at[..., 0].set(0)
    return BCSR((data, indices, indptr), shape=shape)


def rand_bcoo(rng, rand_method=jtu.rand_default, nse=0.5, n_batch=0, n_dense=0):
    """``(shape, dtype) -> BCOO`` with ``nse`` stored elements (a fraction below 1: of the
    sparse part's size) at random indices."""
    return functools.partial(_rand_sparse, rng=rng, rand_method=rand_method, nse=nse,
                             n_batch=n_batch, n_dense=n_dense, sparse_format="bcoo")


def rand_bcsr(rng, rand_method=jtu.rand_default, nse=0.5, n_batch=0, n_dense=0):
    """``(shape, dtype) -> BCSR`` (two sparse dimensions) with random indices."""
    return functools.partial(_rand_sparse, rng=rng, rand_method=rand_method, nse=nse,
                             n_batch=n_batch, n_dense=n_dense, sparse_format="bcsr")


def iter_subsets(s):
    """Every subset of ``s`` (as tuples), by size."""
    return itertools.chain.from_iterable(itertools.combinations(s, n)
                                         for n in range(len(s) + 1))


def iter_sparse_layouts(shape, min_n_batch=0):
    """Every BCOO layout of an array of ``shape`` with at least ``min_n_batch`` batch dims."""
    for n_batch in range(min_n_batch, len(shape) + 1):
        for n_dense in range(len(shape) + 1 - n_batch):
            yield SparseLayout(n_batch=n_batch, n_sparse=len(shape) - n_batch - n_dense,
                               n_dense=n_dense)


def iter_bcsr_layouts(shape, min_n_batch=0):
    """Every BCSR layout (two sparse dimensions) of an array of ``shape``."""
    for n_batch in range(min_n_batch, len(shape) - 1):
        yield SparseLayout(n_batch=n_batch, n_sparse=2, n_dense=len(shape) - 2 - n_batch)


def rand_sparse(rng, nse=0.5, post=lambda x: x, rand_method=jtu.rand_default):
    """``(shape, dtype) -> dense array`` with all but ``nse`` elements (a fraction below 1:
    of its size) zeroed."""
    def draw(shape, dtype, nse=nse):
        rand = rand_method(rng)
        size = math.prod(shape)
        if 0 <= nse < 1:
            nse = nse * size
        nse = min(size, int(nse))
        m = rand(shape, dtype)
        m.flat[rng.choice(size, size - nse, replace=False)] = 0
        return post(m)
    return draw
