"""Differentiation with respect to sparse arrays: ``grad``, ``value_and_grad``, ``jacfwd``,
``jacrev`` (``jacobian``) as plax's, except that a sparse argument is differentiated in its
sparsity pattern: through its ``data`` only, and its derivative is a sparse array with the
same indices (and, for Jacobians, the output dimensions as leading batch dimensions). All
go through ``flatten_fun_for_sparse_ad``; as in JAX, a single differentiated argument's
derivative comes alone even when ``argnums`` is a tuple."""
from __future__ import annotations

import functools
import operator

from plax import numpy as jnp
from plax import tree_util
from plax.api import autodiff
from plax.api.vmap import vmap
from plax.experimental.sparse._base import JAXSparse
from plax.experimental.sparse.bcoo import BCOO

__all__ = ["grad", "value_and_grad", "jacfwd", "jacrev", "jacobian", "is_sparse",
           "flatten_fun_for_sparse_ad", "wraps"]


def wraps(wrapped, namestr=None, docstr=None, **kwargs):
    """A decorator giving a function ``wrapped``'s name, docstring, module and attributes
    (as ``functools.wraps``); ``namestr`` and ``docstr`` are format strings for a new name
    and docstring (``{fun}`` is the wrapped name, ``{doc}`` its docstring, and ``kwargs``
    fill other fields)."""
    def decorate(fun):
        name = getattr(wrapped, "__name__", None) or type(wrapped).__name__
        doc = getattr(wrapped, "__doc__", "") or ""
        try:
            fun.__dict__.update(getattr(wrapped, "__dict__", {}))
            fun.__annotations__ = getattr(wrapped, "__annotations__", {})
            fun.__name__ = name if namestr is None else namestr.format(fun=name)
            fun.__qualname__ = getattr(wrapped, "__qualname__", fun.__name__)
            fun.__module__ = getattr(wrapped, "__module__", "<unknown module>")
            fun.__doc__ = doc if docstr is None else docstr.format(fun=name, doc=doc, **kwargs)
            fun.__wrapped__ = wrapped
        except (AttributeError, TypeError):  # a callable whose attributes are read-only
            pass
        return fun
    return decorate


def is_sparse(x) -> bool:
    """Whether ``x`` is a sparse array (BCOO, BCSR, COO, CSR, CSC)."""
    return isinstance(x, JAXSparse)



def _argnums(argnums, nargs: int) -> tuple:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    nums = tuple(operator.index(i) for i in nums)
    for i in nums:
        if not -nargs <= i < nargs:
            raise TypeError(f"Differentiating with respect to argnums={argnums} requires at "
                            f"least {max(nums) + 1} positional arguments to be passed by the "
                            f"caller, but got only {nargs} positional arguments.")
    return tuple(i % nargs for i in nums)


def _with_data(template: BCOO, data, leading: bool = False) -> BCOO:
    """A BCOO array with ``template``'s indices holding ``data``; with ``leading``, extra
    leading dimensions of ``data`` become batch dimensions (the indices repeated)."""
    extra = data.ndim - template.data.ndim if leading else 0
    indices = template.indices
    if extra:
        lead = data.shape[:extra]
        indices = jnp.broadcast_to(indices, lead + indices.shape)
    return BCOO((data, indices), shape=tuple(data.shape[:extra]) + template.shape,
                indices_sorted=template.indices_sorted, unique_indices=template.unique_indices)


def flatten_fun_for_sparse_ad(fun, argnums, args):
    """``(fun_flat, argnums_flat, args_flat, postprocess_gradients)`` for differentiating
    ``fun`` at ``args`` with respect to ``argnums`` through a transformation of dense
    arguments: ``args_flat`` are every buffer of ``args`` (a sparse array's data, indices,
    ...), ``fun_flat`` takes them, ``argnums_flat`` numbers the buffers to differentiate
    (the data only, for a sparse array), and ``postprocess_gradients`` turns the gradients
    of those buffers into gradients shaped like the arguments (sparse arrays with their
    indices; leading Jacobian dimensions of a data gradient become batch dimensions)."""
    nums = _argnums(argnums, len(args))
    top, top_tree = tree_util.tree_flatten(args, is_leaf=is_sparse)
    owner = [i for i, a in enumerate(args)
             for _ in range(len(tree_util.tree_flatten(a, is_leaf=is_sparse)[0]))]
    parts = [tree_util.tree_flatten(leaf) for leaf in top]
    starts, args_flat = [], []
    for bufs, _ in parts:
        starts.append(len(args_flat))
        args_flat.extend(bufs)
    chosen = [j for j in range(len(top)) if owner[j] in nums]
    argnums_flat = tuple(starts[j] + k for j in chosen
                         for k in range(1 if is_sparse(top[j]) else len(parts[j][0])))

    def fun_flat(*bufs, **kw):
        leaves = [tree_util.tree_unflatten(tree, list(bufs[st:st + len(b)]))
                  for st, (b, tree) in zip(starts, parts)]
        return fun(*tree_util.tree_unflatten(top_tree, leaves), **kw)

    def rebuild(j, grad):
        if not is_sparse(top[j]):
            return grad
        if isinstance(top[j], BCOO):
            return _with_data(top[j], grad, leading=True)
        bufs, tree = parts[j]
        make = lambda g: tree_util.tree_unflatten(tree, [g, *bufs[1:]])  # noqa: E731
        for _ in range(jnp.ndim(grad) - jnp.ndim(bufs[0])):
            make = vmap(make)
        return make(grad)

    def postprocess_gradients(grads_out):
        leaf_grads = [None] * len(top)
        for j, g in zip(chosen, grads_out):
            leaf_grads[j] = rebuild(j, g)
        per_arg = [tree_util.tree_unflatten(top_tree, leaf_grads)[i] for i in nums]
        return per_arg[0] if len(per_arg) == 1 else tuple(per_arg)

    return fun_flat, argnums_flat, args_flat, postprocess_gradients


def _sparse_transform(transform, fun, argnums, has_aux, kwargs, with_value=False):
    """``transform`` (plax's grad, jacfwd, ...) of ``fun`` through its arguments' buffers:
    sparse arguments differentiated through their data (``flatten_fun_for_sparse_ad``)."""
    @functools.wraps(fun)
    def wrapped(*args, **call_kwargs):
        fun_flat, nums, args_flat, postprocess = flatten_fun_for_sparse_ad(fun, argnums, args)
        out = transform(functools.partial(fun_flat, **call_kwargs), argnums=nums,
                        has_aux=has_aux, **kwargs)(*args_flat)
        if with_value:
            value, grads = out
            return value, postprocess(grads)
        if has_aux:
            return postprocess(out[0]), out[1]
        return postprocess(out)
    return wrapped


def value_and_grad(fun, argnums=0, has_aux: bool = False, **kwargs):
    """``plax.value_and_grad``, differentiating BCOO arguments in their sparsity pattern."""
    return _sparse_transform(autodiff.value_and_grad, fun, argnums, has_aux, kwargs,
                             with_value=True)


def grad(fun, argnums=0, has_aux: bool = False, **kwargs):
    """``plax.grad``, differentiating BCOO arguments in their sparsity pattern: the gradient
    of a BCOO argument is a BCOO array with its indices."""
    return _sparse_transform(autodiff.grad, fun, argnums, has_aux, kwargs)


def jacfwd(fun, argnums=0, has_aux: bool = False, **kwargs):
    """``plax.jacfwd``, differentiating BCOO arguments in their sparsity pattern (dense
    outputs)."""
    return _sparse_transform(autodiff.jacfwd, fun, argnums, has_aux, kwargs)


def jacrev(fun, argnums=0, has_aux: bool = False, **kwargs):
    """``plax.jacrev``, differentiating BCOO arguments in their sparsity pattern (dense
    outputs)."""
    return _sparse_transform(autodiff.jacrev, fun, argnums, has_aux, kwargs)


jacobian = jacrev
