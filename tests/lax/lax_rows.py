"""The row schema shared by the lax primitive tables (elementwise, shapes, reductions).

A ``Row`` names a public function (``plax.lax.sin``; with static arguments or a small
adapter when the function takes more than arrays), a NumPy/SciPy reference, one entry of
the input vocabulary ``VOCAB`` per array argument, the dtypes it runs at and flags.
``table_tests(rows, value_cases)`` makes the checks every row gets, so a new primitive
gets all of them by adding one row:

  test_value     the eager result against the reference: dtype, shape and values
  test_jit       ``plax.jit`` of the call gives exactly (bit for bit) the eager result
  test_vmap      vmap with the batch at axis 0, 1 and -1 of every argument (where the rank
                 allows) and with each argument in turn unbatched equals the per-example
                 results, stacked
  test_grad      "numeric" / "squared" rows: ``check_grads`` (finite differences, jvp
                 against vjp) to second order in both modes for every dtype of
                 ``grad_dtypes`` ("squared" differentiates ``square(f)``, so linear ops have
                 a non-zero second derivative); "zero" rows: zero tangents of the output
                 dtype and no contribution in reverse mode; "float0" rows (integer or bool
                 results): float0 tangents, and no contribution in reverse mode
  test_jaxpr     the staged jaxpr ends in the row's primitive (found by name among
                 ``plax.core.rules.all_primitives``) with the output's shape and dtype and,
                 when the row says so, the given params

A row flagged ``variant`` is a further configuration of a function that has a main row
(other shapes or axes, empty or 0-d operands, other static parameters): it gets the value,
jaxpr and derivative checks, and leaves test_jit and test_vmap to the main rows (before the
tables were merged, each variant was a value-only or a derivative-only case).

Primitives are reached only through public names (``plax.lax.<fn>``), never through the
modules of ``plax.lax`` (their layout changes).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import pytest

import plax
from plax import lax
from plax.core import rules
from plax.test_util import check_grads

import helpers
from helpers import BF16, BOOL, C64, F32, I32, check, wide

F64 = np.dtype(np.float64)
REAL_GRAD = (F32, F64)          # the dtypes of the derivative checks of real-only rules
ALL_GRAD = (F32, F64, C64)      # ... and of the rules defined for complex numbers too
SAME = "same"                   # Row.out: the output dtype is the input dtype
B = 3                           # the vmap batch size


# --- the input vocabulary ----------------------------------------------------------------
# Each entry makes the values of one argument: ``values`` for the value, jit and vmap checks
# (the ranges of helpers.sample) and ``grad`` for the derivative checks (inside the first
# range, away from the kinks and poles a central difference with eps=1e-2 cannot straddle).
def _grad_uniform(lo, hi, signed=False):
    def make(shape, dtype, seed):
        rng = np.random.default_rng(100 + seed)
        v = rng.uniform(lo, hi, shape)
        if signed:
            v = v * rng.choice([-1, 1], shape)
        if np.dtype(dtype).kind == "c":
            v = v + 1j * rng.uniform(-0.3, 0.3, shape)
        return np.asarray(v, dtype)
    return make


def _helpers_domain(domain, sign=1):
    def make(shape, dtype, seed):
        return (sign * helpers.sample(shape, dtype, domain, seed=seed)).astype(dtype)
    return make


def _distinct(shape, dtype, seed):
    """A permutation of a grid with spacing 0.4, shifted by 0.12 per seed: no ties within an
    array, and arrays of different seeds differ by at least 0.12 everywhere."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        base = np.arange(n) - (0 if dtype.kind == "u" else n // 2)
        return rng.permutation(base).reshape(shape).astype(dtype)
    v = (rng.permutation(np.arange(n)) - n / 2 + 0.25 + 0.3 * (seed % 3)) * 0.4
    v = v.reshape(shape)
    if dtype.kind == "c":
        v = v + 1j * rng.uniform(-0.3, 0.3, shape)
    return np.asarray(v, dtype)


def _ties(shape, dtype, seed):
    """Few distinct values (ties are common) and, for floats, some NaNs."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -2, 3, shape).astype(dtype)
    v = rng.integers(-2, 3, shape) / 2
    v = np.where(rng.random(shape) < 0.15, np.nan, v)
    return np.asarray(v, dtype)


def _fixed(dtype, make):
    """An argument whose dtype does not follow the row's (predicates, indices)."""
    return lambda shape, _, seed: make(shape, dtype, seed)


INDEX_CYCLE = np.array([-1, 1, 7], np.int32)  # from the end, in bounds, clamped


def _index(shape, dtype, seed):
    return np.resize(np.roll(INDEX_CYCLE, seed), shape).astype(dtype)


@dataclass(frozen=True)
class Input:
    name: str
    values: object          # (shape, dtype, seed) -> np.ndarray
    grad: object = None     # (shape, dtype, seed) -> np.ndarray; None: same as ``values``
    doc: str = ""


VOCAB = {i.name: i for i in [
    Input("real", _helpers_domain("real"), _grad_uniform(0.3, 2, signed=True),
          "floats in [-2, 2] (derivatives: |x| in [0.3, 2]), ints in [-5, 5]"),
    Input("positive", _helpers_domain("pos"), _grad_uniform(0.5, 2),
          "floats in [0.1, 3] (derivatives: [0.5, 2]), ints in [1, 5]"),
    Input("negative", _helpers_domain("pos", -1), _grad_uniform(-2, -0.5),
          "the negatives of positive"),
    Input("unit_interval", _helpers_domain("unit"), _grad_uniform(-0.8, 0.8),
          "floats in [-0.9, 0.9] (derivatives: [-0.8, 0.8]), ints in [-1, 1]"),
    Input("ge1", _helpers_domain("ge1"), _grad_uniform(1.3, 3),
          "floats in [1.1, 3] (derivatives: [1.3, 3]), ints in [1, 5]"),
    Input("nonzero", _helpers_domain("nonzero"), _grad_uniform(0.5, 2, signed=True),
          "both signs, |x| in [0.5, 2]; ints in +-[1, 5]"),
    Input("small", _helpers_domain("small"), doc="floats in [0, 3], ints in [0, 4]"),
    Input("shift", _helpers_domain("shift"), doc="ints in [0, 7]: shift amounts"),
    Input("distinct", _distinct, doc="no ties, also between arguments: a permuted grid"),
    Input("ties", _ties, doc="values in {-1, -0.5, .., 1} (ints [-2, 2]) and NaNs: argmax"),
    Input("bool", _fixed(BOOL, lambda s, d, seed: helpers.sample(s, d, seed=seed + 7)),
          doc="bools, whatever the row's dtype (predicates)"),
    Input("which3", _fixed(I32, lambda s, d, seed: helpers.sample(s, d, "small", seed) % 3),
          doc="int32 in {0, 1, 2}: select_n's case index"),
    Input("index", _fixed(I32, _index),
          doc="int32 start indices: -1 (from the end), 1, 7 (clamped)"),
]}


def sample_arg(entry, shape, dtype, seed, grad=False):
    inp = VOCAB[entry]
    make = inp.grad if grad and inp.grad is not None else inp.values
    return make(shape, dtype, seed)


# --- rows -----------------------------------------------------------------------------------
def primitive(name):
    """The Primitive called ``name``, from the registry of every primitive."""
    found = [p for p in rules.all_primitives if p.name == name]
    assert len(found) == 1, (name, found)
    return found[0]


@dataclass
class Row:
    fn: object                  # the public function, e.g. plax.lax.sin
    ref: object                 # NumPy/SciPy reference, called on the NumPy arguments
    inputs: tuple = ("real",)   # one VOCAB entry per array argument
    dtypes: tuple = (F32,)      # value checks; the first also runs jit, vmap and jaxpr
    shapes: tuple = None        # per-argument shapes; None: elementwise (the value cases pick)
    static: tuple = ()          # further positional arguments after the arrays
    call: object = None         # instead of fn(*arrays, *static), when fn needs more
    name: str = ""              # the test id (default: fn's name)
    prim: str = ""              # the primitive the staged jaxpr ends in (default: fn's name)
    params: dict = None         # params that primitive's equation must have
    out: object = SAME          # output dtype: SAME, a dtype or a function of the input's
    rtol: object = None         # None: helpers.tolerance; a number; or {dtype: rtol}
    grad: str = None            # None, "numeric", "squared", "zero" or "float0"
    grad_dtypes: tuple = (F32,)
    grad_inputs: tuple = None   # vocabulary for the derivative check (default: inputs)
    grad_args: object = None    # dtype -> arguments, for points the vocabulary cannot name
    grad_tol: dict = field(default_factory=dict)  # check_grads tolerances
    equal_pair: bool = False    # make one pair of elements equal (comparisons see ties)
    accepts: tuple = None       # every dtype accepted (elementwise: the others raise)
    variant: bool = False       # a further configuration of a function with a main row:
    #                             no test_jit / test_vmap (see the module docstring)

    def __post_init__(self):
        self.name = self.name or self.fn.__name__
        self.prim = self.prim or self.fn.__name__
        self.accepts = tuple(self.accepts or self.dtypes)
        if self.call is None:
            fn, static = self.fn, self.static
            self.call = lambda *args: fn(*args, *static)

    def __repr__(self):
        return self.name

    @property
    def differentiable(self):
        return self.grad in ("numeric", "squared")

    def out_dtype(self, dtype):
        if self.out is SAME:
            return np.dtype(dtype)
        return np.dtype(self.out(dtype) if callable(self.out) else self.out)

    def arg_shapes(self, shape=(2, 3)):
        return self.shapes if self.shapes is not None else (shape,) * len(self.inputs)

    def args(self, dtype, shapes=None, batch=None, grad=False):
        shapes = shapes or self.arg_shapes()
        inputs = (self.grad_inputs or self.inputs) if grad else self.inputs
        lead = () if batch is None else (batch,)
        return [sample_arg(e, lead + tuple(s), dtype, seed=i, grad=grad)
                for i, (e, s) in enumerate(zip(inputs, shapes))]

    def tol(self, dtype):
        if isinstance(self.rtol, dict):
            return self.rtol.get(np.dtype(dtype))
        return self.rtol


# --- the checks -----------------------------------------------------------------------------
def _x64(dtype):
    return plax.enable_x64() if np.dtype(dtype) in (F64, np.dtype(np.complex128)) \
        else contextlib.nullcontext()


def _exact(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    np.testing.assert_array_equal(wide(got), wide(want))


def check_value(row, dtype, shapes=None):
    args = row.args(dtype, shapes)
    if row.equal_pair and args[0].ndim == 2 and args[0].size and np.dtype(dtype) != BOOL:
        args[0][0, 0] = args[1][0, 0]  # one equal pair, so comparisons see equality too
    out = row.call(*args)
    out_dtype = row.out_dtype(dtype)
    want = np.asarray(row.ref(*args))
    if out_dtype.kind in "iub":
        want = want.astype(out_dtype)
    check(out, want, out_dtype, rtol=row.tol(dtype))


def vmap_layouts(batched):
    """``(args, in_axes)`` pairs: the batch (at axis 0 of ``batched``) moved to axis 0, 1
    and -1 of every argument (where its rank allows), then each argument in turn unbatched
    (its first example) while the others stay batched at 0."""
    layouts = []
    for dst in (0, 1, -1):
        moved, axes = [], []
        for a in batched:
            d = dst if -a.ndim <= dst < a.ndim else 0
            moved.append(np.moveaxis(a, 0, d))
            axes.append(d)
        if (tuple(axes), [m.shape for m in moved]) not in [(ax, [m.shape for m in ms])
                                                            for ms, ax in layouts]:
            layouts.append((moved, tuple(axes)))
    if len(batched) > 1:
        for k in range(len(batched)):
            args = [a if i != k else a[0] for i, a in enumerate(batched)]
            layouts.append((args, tuple(None if i == k else 0 for i in range(len(batched)))))
    return layouts


def _close(got, want, tol, what):
    got, want = np.asarray(got), np.asarray(want)
    assert (got.shape, got.dtype) == (want.shape, want.dtype), (what, got.shape, got.dtype,
                                                                want.shape, want.dtype)
    tol = helpers.tolerance(got.dtype) if tol is None else tol
    if tol:
        np.testing.assert_allclose(wide(got), wide(want), rtol=tol, atol=tol, equal_nan=True,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(wide(got), wide(want), err_msg=what)


def check_jit(row):
    """``plax.jit`` of the call gives exactly the eager result."""
    args = row.args(row.dtypes[0])
    _close(plax.jit(row.call)(*args), row.call(*args), 0, "jit differs from eager")


def check_vmap(row):
    """Every layout of ``vmap_layouts`` under (eager) vmap == the per-example results,
    stacked."""
    dtype = row.dtypes[0]
    for args, axes in vmap_layouts(row.args(dtype, batch=B)):
        out = plax.vmap(row.call, in_axes=axes)(*args)
        per_example = [row.call(*[a if ax is None else np.take(a, i, axis=ax)
                                  for a, ax in zip(args, axes)]) for i in range(B)]
        _close(out, np.stack([np.asarray(p) for p in per_example]), row.tol(dtype),
               f"vmap with in_axes={axes}")


def _split(args):
    """Positions of the arguments to differentiate (inexact ones) and a function that
    puts new values for them back among the others."""
    diff = [i for i, a in enumerate(args) if np.asarray(a).dtype.kind in "fc"
            or np.asarray(a).dtype == BF16]

    def merge(values):
        full = list(args)
        for i, v in zip(diff, values):
            full[i] = v
        return full
    return diff, merge


def _sum_all(x):
    return lax.reduce_sum(x, tuple(range(np.ndim(x))))


def check_grad(row, dtype):
    with _x64(dtype):
        args = row.grad_args(dtype) if row.grad_args else row.args(dtype, grad=True)
        diff, merge = _split(args)
        if row.grad in ("numeric", "squared"):
            def f(*values):
                out = row.call(*merge(values))
                return lax.square(out) if row.grad == "squared" else out
            tol = {**helpers.grad_check_defaults(dtype), **row.grad_tol}
            check_grads(f, [args[i] for i in diff], 2, modes=("fwd", "rev"), **tol)
        elif row.grad == "zero":
            # a zero tangent of the output's dtype; in reverse mode no contribution at all
            ones = [np.ones_like(args[i]) for i in diff]
            out, t = plax.jvp(lambda *v: row.call(*merge(v)), [args[i] for i in diff], ones)
            assert np.asarray(t).dtype == np.asarray(out).dtype, (t, out)
            np.testing.assert_array_equal(np.asarray(t), np.zeros(np.shape(out), out.dtype))
            first = diff[0]
            g = plax.grad(lambda x: _sum_all(lax.mul(row.call(*merge([x] + [args[i] for i in
                                                                         diff[1:]])), x)))
            np.testing.assert_allclose(np.asarray(g(args[first])), np.asarray(out), rtol=1e-6)
        elif row.grad == "float0":
            tangents = [np.ones_like(a) if i in diff else np.zeros(np.shape(a), plax.float0)
                        for i, a in enumerate(args)]
            out, t = plax.jvp(row.call, args, tangents)
            assert np.asarray(t).dtype == plax.float0, t
            assert np.shape(t) == np.shape(out)
            if diff:  # reverse mode: the integer/bool output contributes nothing
                def f(x):
                    full = merge([x] + [args[i] for i in diff[1:]])
                    return lax.add(_sum_all(lax.convert_element_type(row.call(*full), F32)),
                                   _sum_all(x))
                np.testing.assert_array_equal(np.asarray(plax.grad(f)(args[diff[0]])),
                                              np.ones(np.shape(args[diff[0]]), F32))
        else:
            raise AssertionError(f"row {row} has no derivative check")


def check_jaxpr(row):
    args = row.args(row.dtypes[0])
    jaxpr = plax.make_jaxpr(row.call)(*args).jaxpr
    out = row.call(*args)
    assert jaxpr.eqns, jaxpr
    last = jaxpr.eqns[-1]
    assert last.primitive is primitive(row.prim), jaxpr
    assert jaxpr.outvars[0] is last.outvars[0], jaxpr
    aval = last.outvars[0].aval
    assert (aval.shape, aval.dtype) == (out.shape, out.dtype), (aval, out.aval)
    for k, v in (row.params or {}).items():
        assert last.params[k] == v, (k, last.params)


def grad_cases(rows):
    cases = []
    for row in rows:
        if row.differentiable:
            dts = row.grad_dtypes
        elif row.grad in ("zero", "float0"):
            dts = row.grad_dtypes[:1] if row.grad == "zero" else row.dtypes[:1]
        else:
            continue
        cases += [pytest.param(row, d, id=f"{row.name}-{np.dtype(d).name}") for d in dts]
    return cases


def dtype_cases(rows):
    """Every dtype of every row, at the row's shapes."""
    return [pytest.param(row, d, None, id=f"{row.name}-{np.dtype(d).name}")
            for row in rows for d in row.dtypes]


def table_tests(rows, value_cases=dtype_cases):
    """The five table tests over ``rows``, to assign to a test module's names."""
    ids = [r.name for r in rows]
    assert len(set(ids)) == len(ids), sorted(i for i in ids if ids.count(i) > 1)
    main = [r for r in rows if not r.variant]
    assert {r.fn for r in rows} == {r.fn for r in main}, "every function needs a main row"

    @pytest.mark.parametrize("row,dtype,shapes", value_cases(rows))
    def test_value(row, dtype, shapes):
        check_value(row, dtype, shapes)

    @pytest.mark.parametrize("row", main, ids=repr)
    def test_jit(row):
        check_jit(row)

    @pytest.mark.parametrize("row", main, ids=repr)
    def test_vmap(row):
        check_vmap(row)

    @pytest.mark.parametrize("row,dtype", grad_cases(rows))
    def test_grad(row, dtype):
        check_grad(row, dtype)

    @pytest.mark.parametrize("row", rows, ids=ids)
    def test_jaxpr(row):
        check_jaxpr(row)

    return test_value, test_jit, test_vmap, test_grad, test_jaxpr
