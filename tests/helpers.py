"""Shared test helpers: dtype shorthands, random samples by domain, tolerant comparisons, a
fresh interpreter's choice of platforms."""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np

import plax

F32, F16, BF16, C64 = (np.dtype(t) for t in (np.float32, np.float16, ml_dtypes.bfloat16, np.complex64))
I32, U8, I8, I16, BOOL = (np.dtype(t) for t in (np.int32, np.uint8, np.int8, np.int16, np.bool_))

# Input domains: (low, high) for floats (complex values add a small imaginary part) and ints.
FLOAT_DOMAINS = {"real": (-2, 2), "unit": (-0.9, 0.9), "pos": (0.1, 3), "ge1": (1.1, 3),
                 "nonzero": (0.5, 2), "small": (0, 3)}
INT_DOMAINS = {"real": (-5, 5), "unit": (-1, 1), "pos": (1, 5), "ge1": (1, 5), "nonzero": (1, 5),
               "shift": (0, 7), "small": (0, 4)}


def sample(shape, dtype, domain="real", seed=0):
    """Random values of ``dtype`` in ``domain`` ("nonzero" draws both signs away from zero)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    sign = np.where(rng.random(shape) < 0.5, -1, 1) if domain == "nonzero" else 1
    if dtype == BOOL:
        return rng.random(shape) < 0.5 if domain not in ("pos", "nonzero") else np.ones(shape, bool)
    if dtype.kind in "iu":
        lo, hi = INT_DOMAINS[domain]
        if dtype.kind == "u":
            lo, sign = max(lo, 0), 1
        return (sign * rng.integers(lo, hi + 1, shape)).astype(dtype)
    lo, hi = FLOAT_DOMAINS[domain]
    values = sign * rng.uniform(lo, hi, shape)
    if dtype.kind == "c":
        values = values + 1j * rng.uniform(-0.5, 0.5, shape)
    return values.astype(dtype)


def wide(x):
    """Host copy in which NumPy computes the reference: float64/complex128 for inexact input."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    if x.dtype.kind == "f" or x.dtype == BF16:
        return x.astype(np.float64)
    return x


def tolerance(dtype):
    return {BF16: 2e-2, F16: 4e-3, F32: 2e-5, C64: 2e-5}.get(np.dtype(dtype), 0)


def check(out, want, dtype, weak=None, rtol=None):
    """``out`` is a plax Array of ``dtype`` (and weak type) whose values match ``want`` (NaNs match)."""
    assert isinstance(out, plax.Array), type(out)
    assert out.dtype == np.dtype(dtype), (out.dtype, dtype)
    if weak is not None:
        assert out.aval.weak_type == weak, out.aval
    want = np.asarray(want)
    assert out.shape == want.shape, (out.shape, want.shape)
    tol = tolerance(dtype) if rtol is None else rtol
    if tol:
        np.testing.assert_allclose(wide(out), wide(want), rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(np.asarray(out), want)


# --- vmap -------------------------------------------------------------------------------------
def _take(x, i, axis):
    return x if axis is None else np.take(np.asarray(x), i, axis=axis)


def check_vmap(fun, *args, in_axes=0, out_axes=0, rtol=None, **vmap_kwargs):
    """``plax.vmap(fun, in_axes, out_axes)(*args)`` equals ``fun`` applied to each example
    (the slices of the mapped arguments) and stacked along ``out_axes``. Returns the output."""
    axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
    sizes = {np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None}
    size = vmap_kwargs.get("axis_size") or sizes.pop()
    out = plax.vmap(fun, in_axes=in_axes, out_axes=out_axes, **vmap_kwargs)(*args)
    per_example = [fun(*[_take(a, i, ax) for a, ax in zip(args, axes)]) for i in range(size)]
    leaves, tree = plax.tree_util.tree_flatten(out)
    ex_leaves = [plax.tree_util.tree_leaves(p) for p in per_example]
    out_ax = out_axes if isinstance(out_axes, (tuple, list, dict)) else None
    dst = (plax.tree_util.tree_leaves(out_axes, is_leaf=lambda x: x is None)
           if out_ax is not None else [out_axes] * len(leaves))
    if len(dst) != len(leaves):  # a prefix: expand it over the output tree
        dst = [out_axes] * len(leaves) if not isinstance(out_axes, (tuple, list, dict)) else \
            plax.tree_util.tree_leaves(plax.tree_util.tree_broadcast(out_axes, out,
                                                                     is_leaf=lambda x: x is None))
    for j, (leaf, ax) in enumerate(zip(leaves, dst)):
        want = np.asarray(ex_leaves[0][j]) if ax is None else \
            np.stack([np.asarray(e[j]) for e in ex_leaves], axis=ax)
        got = np.asarray(leaf)
        assert got.shape == want.shape, (j, got.shape, want.shape)
        assert got.dtype == want.dtype, (j, got.dtype, want.dtype)
        tol = tolerance(got.dtype) if rtol is None else rtol
        if tol:
            np.testing.assert_allclose(wide(got), wide(want), rtol=tol, atol=tol, equal_nan=True)
        else:
            np.testing.assert_array_equal(got, want)
    return out


def check_vmap_axes(fun, *batched, rtol=None, unbatched=True):
    """Check ``vmap(fun)`` with the batch of every argument at axis 0, 1 and -1 (where the
    rank allows), and with each argument in turn left unbatched.

    ``batched`` hold the batch at axis 0; the other layouts are made by moving it.
    """
    layouts = []
    for dst in (0, 1, -1):
        moved, axes = [], []
        for a in batched:
            a = np.asarray(a)
            d = dst if -a.ndim <= dst < a.ndim else 0
            moved.append(np.moveaxis(a, 0, d))
            axes.append(d)
        layouts.append((moved, tuple(axes)))
    if unbatched and len(batched) > 1:
        for k in range(len(batched)):
            args = [np.asarray(a) if i != k else np.asarray(a)[0] for i, a in enumerate(batched)]
            layouts.append((args, tuple(None if i == k else 0 for i in range(len(batched)))))
    for args, axes in layouts:
        check_vmap(fun, *args, in_axes=axes, rtol=rtol)


def dot_general_reference(lhs, rhs, dimension_numbers):
    """dot_general's semantics spelled out with np.einsum (batch dims, then lhs free, then
    rhs free), computed in float64/complex128."""
    (lc, rc), (lb, rb) = dimension_numbers
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    ls = [next(letters) for _ in range(np.ndim(lhs))]
    rs = [next(letters) for _ in range(np.ndim(rhs))]
    for left, right in zip(tuple(lc) + tuple(lb), tuple(rc) + tuple(rb)):
        rs[right] = ls[left]
    out = ([ls[d] for d in lb] + [ls[i] for i in range(len(ls)) if i not in tuple(lb) + tuple(lc)]
           + [rs[i] for i in range(len(rs)) if i not in tuple(rb) + tuple(rc)])
    wide = np.complex128 if np.iscomplexobj(lhs) or np.iscomplexobj(rhs) else np.float64
    return np.einsum(f"{''.join(ls)},{''.join(rs)}->{''.join(out)}",
                     np.asarray(lhs).astype(wide), np.asarray(rhs).astype(wide))


def rand(shape, dtype=F32, seed=0, ints=(-4, 5)):
    """Standard normal values of ``dtype`` (complex: both parts), or integers in ``ints``."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return rng.integers(*ints, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def close(out, want, dtype, rtol=2e-5, atol=2e-5):
    """``out`` is a plax Array of ``dtype`` and ``want``'s shape, close to it (NaNs equal)."""
    assert isinstance(out, plax.Array), type(out)
    assert out.dtype == np.dtype(dtype), (out.dtype, dtype)
    assert out.shape == np.shape(want), (out.shape, np.shape(want))
    np.testing.assert_allclose(np.asarray(out).astype(np.result_type(out.dtype, np.float64)),
                               want, rtol=rtol, atol=atol, equal_nan=True)


def check_f32(got, want, rtol=2e-5, atol=1e-6):
    """``got`` is a float32 plax Array of ``want``'s shape, close to it (NaNs equal)."""
    assert isinstance(got, plax.Array), type(got)
    assert got.dtype == F32, got.dtype
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=atol,
                               equal_nan=True)


def check_exact(got, want, dtype=None):
    """``got`` equals ``want`` exactly, in shape (and ``dtype`` when given)."""
    want = np.asarray(want)
    assert tuple(got.shape) == want.shape, (got.shape, want.shape)
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    np.testing.assert_array_equal(np.asarray(got), want)


# --- linear algebra ------------------------------------------------------------------------
def x64_for(dtype):
    """A context enabling x64 for float64/complex128 ``dtype`` (a no-op otherwise)."""
    import contextlib
    wide_dtype = np.dtype(dtype) in (np.dtype(np.float64), np.dtype(np.complex128))
    return plax.enable_x64() if wide_dtype else contextlib.nullcontext()


def linalg_tol(dtype):
    """Comparison tolerances for factorisation results in ``dtype``'s precision."""
    single = np.dtype(dtype) in (F32, C64)
    return dict(rtol=2e-4, atol=2e-4) if single else dict(rtol=1e-10, atol=1e-10)


def linalg_close(got, want, dtype=F32, **tol):
    """``got`` is a plax Array of ``want``'s shape and values (linalg_tol(dtype) unless
    ``tol`` says otherwise)."""
    assert isinstance(got, plax.Array), type(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(np.asarray(got), want, **(tol or linalg_tol(dtype)))


def well_conditioned(shape, dtype=F32, seed=0):
    """Random (batches of) square matrices with a dominant diagonal: condition number near 1."""
    n = shape[-1]
    return (rand(shape, dtype, seed) + 3 * n ** 0.5 * np.eye(n)).astype(dtype)


def spd(shape, dtype=F32, seed=0):
    """Random Hermitian positive-definite (batches of) matrices."""
    x = rand(shape, dtype, seed)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def check_table(cases, dtype, shape, rtol, atol):
    """Each ``(fn, reference, args)`` case: ``fn`` on its arguments broadcast to ``shape`` and
    cast to ``dtype``, against ``reference`` computed in float64 from the same rounded
    inputs (NumPy warnings silenced); every failure is reported at once."""
    failures = []
    for fn, ref, args in cases:
        args = [np.asarray(np.broadcast_to(a, shape), dtype) for a in args]
        got = fn(*args)
        with np.errstate(all="ignore"):
            want = np.asarray(ref(*[a.astype(np.float64) for a in args]), np.float64)
        try:
            close(got, want, dtype, rtol=rtol, atol=atol)
        except AssertionError as e:
            failures.append(f"{fn.__module__}.{fn.__name__}: {e}")
    assert not failures, "\n".join(failures)


def grad_check_defaults(dtype) -> dict:
    """check_grads arguments for the table-driven lax gradient tests: a central-difference
    step of +-5e-3 and tolerances of 2e-2 for 32-bit (and narrower) values, +-5e-6 and 1e-5
    for 64-bit ones. (check_grads' own defaults are JAX's: a +-1e-4 step, which is tight for
    float32 near singular points.)"""
    if np.finfo(dtype).bits <= 32:
        return {"eps": 5e-3, "atol": 2e-2, "rtol": 2e-2}
    return {"eps": 5e-6, "atol": 1e-5, "rtol": 1e-5}


# --- platform selection in a fresh interpreter (backends start once per process) ------------
PLATFORM_PROBE = """
import warnings
warnings.simplefilter("always")
import plax, plax.numpy as jnp
print("DEVICES", [d.platform for d in plax.devices()], plax.default_backend(),
      int((jnp.arange(3) + 1).sum()))
"""

# What names or finds a platform; the tests give each case its own.
_PLATFORM_VARIABLES = ("PLAX_PLATFORMS", "JAX_PLATFORMS", "PJRT_NAMES_AND_LIBRARY_PATHS",
                       "TPU_LIBRARY_PATH")


def run_platform_probe(env_updates, code=PLATFORM_PROBE, path_extra=None):
    """``code`` run by a fresh interpreter whose platform settings are only ``env_updates``
    (``path_extra`` put first on its import path)."""
    env = {k: v for k, v in os.environ.items() if k not in _PLATFORM_VARIABLES}
    env.update(env_updates)
    if path_extra:
        env["PYTHONPATH"] = os.pathsep.join([str(path_extra), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
