"""Seeded random-program differential tests.

A small generator builds short random programs (3-6 steps) over the plax.numpy / plax.lax
surface: elementwise ufuncs, broadcasting binary ops, ``where``/``select_n``, reductions, shape
ops, products, cumulative ops, sorting, gathers and ``.at[]`` updates. Every step is a Python
expression over earlier values (``v3 = jnp.maximum(v0, v2)``), so a program prints as source
and a failure names its seed and the program text (attached as a note to the exception).

Checks:
  * agreement: eager == jit (values, dtypes, weak types) == vmap of slices (vmap over a
    batch axis equals stacking the program applied to each slice); every output has the
    shape and dtype kind that NumPy's rules give (tracked by the generator) and is finite.
  * smooth gradients: programs whose differentiated path uses only smooth ops (kinked ops
    see only closed-over constants) pass ``check_grads`` on the jitted loss (fwd and rev,
    order 1, or 2 for every sixth seed).
  * any-op autodiff: programs with kinked and zero-derivative ops on the differentiated
    path (abs, floor, sign, sort, max, comparisons, casts, guarded ``where``) evaluated at
    inputs that often sit exactly on the kinks (multiples of 0.5, ties, zeros): gradients
    are finite, eager grad == jit grad, jvp == linearize (under jit; integer and bool
    outputs get float0 tangents), and vjp is the transpose of jvp.

Value ranges are kept tame by bound tracking (ops that would leave the bound are not
generated), and every ``log``/``sqrt``/division sees a guarded argument, so a NaN anywhere
is a bug, not a property of the program.

The generator uses only NumPy; the programs name the backend as ``jnp``/``lax``, so the same
program also runs on JAX for cross-checks. ``python tests/test_random_programs.py MODE SEED``
prints a program (MODE agree/smooth/ad; SEED as in the test id).
"""
from __future__ import annotations

import contextlib
import os
import sys

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.test_util import check_grads

# Seeds per check; PLAX_RANDOM_PROGRAM_SEEDS=k runs k times as many (a longer local hunt).
_SCALE = int(os.environ.get("PLAX_RANDOM_PROGRAM_SEEDS", "1"))
N_AGREE, N_SMOOTH, N_AD = 80 * _SCALE, 30 * _SCALE, 30 * _SCALE

F, I, B = "f", "i", "b"
KIND_DTYPE = {F: np.dtype(np.float32), I: np.dtype(np.int32), B: np.dtype(np.bool_)}
SHAPES = [(), (3,), (2, 3), (2, 1), (3,), (2, 3)]
FCAP, ICAP, LIPCAP = 30.0, 1000, 6.0  # float bound, int bound, smooth-mode slope bound
BATCH = 2


def _kind_of(dtype):
    dtype = np.dtype(dtype)
    return B if dtype == np.bool_ else I if dtype.kind in "iu" else F


def _join(*kinds):
    """Result kind of mixing kinds (bool < int < float)."""
    return F if F in kinds else I if I in kinds else B


def _idx_src(idx):
    """Source of a static index tuple (ints, slices, None, Ellipsis, index arrays)."""
    def one(e):
        if e is None:
            return "None"
        if e is Ellipsis:
            return "..."
        if isinstance(e, slice):
            s = "" if e.start is None else str(e.start)
            s += ":" + ("" if e.stop is None else str(e.stop))
            if e.step is not None:
                s += ":" + str(e.step)
            return s
        if isinstance(e, np.ndarray):
            return f"jnp.array({e.tolist()})"
        return str(e)
    return ", ".join(one(e) for e in idx) if idx else "()"


class Val:
    __slots__ = ("name", "shape", "kind", "bound", "diff", "lip")

    def __init__(self, name, shape, kind, bound, diff, lip):
        self.name, self.shape, self.kind = name, tuple(shape), kind
        self.bound, self.diff, self.lip = float(bound), bool(diff), float(lip)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=int))


class Program:
    """Inputs, steps (``name = expr``) and outputs; runs on any module pair (jnp, lax)."""

    def __init__(self, seed, mode, inputs, steps, outputs, vals):
        self.seed, self.mode = seed, mode
        self.inputs = inputs    # [(Val, role)]; role "x" (argument) or "c" (closed-over constant)
        self.steps = steps      # [(name, expr)]
        self.outputs = outputs  # [name]
        self.vals = vals        # name -> Val
        self._code = [(n, compile(e, f"<{n}>", "eval")) for n, e in steps]

    def __str__(self):
        lines = [f"# seed={self.seed} mode={self.mode}"]
        for v, role in self.inputs:
            lines.append(f"{v.name}: {KIND_DTYPE[v.kind].name}{list(v.shape)}"
                         + ("  (constant)" if role == "c" else ""))
        lines += [f"{n} = {e}" for n, e in self.steps]
        lines.append("return " + ", ".join(self.outputs))
        return "\n".join(lines)

    @property
    def args(self):
        return [v for v, role in self.inputs if role == "x"]

    @property
    def consts(self):
        return [v for v, role in self.inputs if role == "c"]

    def sample(self, val, rng, batch=None):
        shape = val.shape if batch is None else (batch,) + val.shape
        if val.kind == B:
            return rng.random(shape) < 0.5
        if val.kind == I:
            return rng.integers(-5, 6, shape).astype(np.int32)
        x = rng.uniform(-2, 2, shape)
        if self.mode != "smooth" and rng.random() < 0.4:  # sit on kinks: zeros, ties, halves
            x = np.round(x * 2) / 2
        return x.astype(np.float32)

    def sample_inputs(self):
        rng = np.random.default_rng(10_000 + self.seed)
        return {v.name: self.sample(v, rng) for v, _ in self.inputs}

    def run(self, env, jnp_mod=None, lax_mod=None):
        jnp_mod = jnp if jnp_mod is None else jnp_mod
        lax_mod = lax if lax_mod is None else lax_mod
        env = {k: jnp_mod.asarray(v) for k, v in env.items()}
        scope = {"jnp": jnp_mod, "lax": lax_mod}
        for name, code in self._code:
            env[name] = eval(code, scope, env)  # noqa: S307 - generated program text
        return tuple(env[o] for o in self.outputs)

    def fun(self, consts=None, outputs=None):
        """The program as a function of its "x" inputs (constants closed over)."""
        consts = {} if consts is None else consts
        names = [v.name for v in self.args]
        keep = None if outputs is None else [self.outputs.index(o) for o in outputs]

        def f(*xs):
            outs = self.run({**consts, **dict(zip(names, xs))})
            return outs if keep is None else tuple(outs[k] for k in keep)
        return f

    def float_outputs(self):
        return [o for o in self.outputs if self.vals[o].kind == F]

    def loss(self, consts):
        """Scalar of the differentiable outputs: sum of tanh."""
        f = self.fun(consts, [o for o in self.float_outputs() if self.vals[o].diff])

        def loss(*xs):
            return sum(jnp.sum(jnp.tanh(o)) for o in f(*xs))
        return loss


class Gen:
    """Builds one program. Modes: "agree" (everything), "smooth" (kinked ops only on values
    that do not depend on the arguments), "ad" (everything, arguments are float)."""

    def __init__(self, seed, mode):
        self.seed, self.mode = seed, mode
        self.rng = np.random.default_rng(seed)
        self.pool, self.vals, self.steps, self.inputs = [], {}, [], []

    # -- random helpers --------------------------------------------------------------------
    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def coin(self, p=0.5):
        return bool(self.rng.random() < p)

    def choose(self, pred=lambda v: True, exclude=()):
        cands = [v for v in self.pool if pred(v) and v.name not in exclude]
        if not cands:
            return None
        w = np.array([(i + 1) ** 2 * (4 if v.diff else 1) for i, v in enumerate(cands)], float)
        return cands[int(self.rng.choice(len(cands), p=w / w.sum()))]

    def kink_ok(self, *vs):
        return self.mode != "smooth" or not any(v.diff for v in vs)

    def new(self, expr, shape, kind, bound, diff, lip=0.0):
        name = f"v{len(self.vals)}"
        cap = ICAP if kind == I else FCAP
        bound = min(float(bound), 1.0) if kind == B else float(bound)
        if not np.isfinite(bound) or bound > cap or (self.mode == "smooth" and lip > LIPCAP):
            return None
        v = Val(name, shape, kind, bound, diff and kind == F, lip if diff else 0.0)
        return expr, v

    def add_input(self, shape, kind, role):
        name = f"v{len(self.vals)}"
        v = Val(name, shape, kind, {F: 2.0, I: 5.0, B: 1.0}[kind], role == "x" and kind == F,
                1.0 if role == "x" else 0.0)
        self.vals[name] = v
        self.pool.append(v)
        self.inputs.append((v, role))

    # -- op families: each returns (expr, Val) or None ---------------------------------------
    def unary_smooth(self):
        v = self.choose(lambda v: v.kind != B)
        if v is None:
            return None
        n, b, d, l = v.name, v.bound, v.diff, v.lip
        opts = [
            (f"jnp.sin({n})", F, 1.0, l), (f"jnp.cos({n})", F, 1.0, l),
            (f"jnp.tanh({n})", F, 1.0, l), (f"jnp.arctan({n})", F, 1.6, l),
            (f"jnp.log1p(jnp.square({n}))", F, np.log1p(b * b), l),
            (f"jnp.log(jnp.square({n}) + 1.0)", F, np.log1p(b * b), l),
            (f"jnp.sqrt(jnp.square({n}) + 1.0)", F, np.sqrt(b * b + 1), l),
            (f"jnp.reciprocal(1.0 + jnp.square({n}))", F, 1.0, l),
            (f"{n} / (1.0 + {n} * {n})", F, 0.5, l),
            (f"jnp.exp(jnp.tanh({n}))", F, np.e, np.e * l),
            (f"jnp.expm1(jnp.sin({n}))", F, 1.72, np.e * l),
            (f"jnp.cbrt(jnp.square({n}) + 1.0)", F, np.cbrt(b * b + 1), l),
            (f"jnp.negative({n})", v.kind, b, l), (f"-{n}", v.kind, b, l),
            (f"jnp.square({n})", v.kind, b * b, 2 * b * l),
            (f"{n} ** 2", v.kind, b * b, 2 * b * l),
            (f"jnp.power({n}, 3)", v.kind, b ** 3, 3 * b * b * l),
            (f"lax.integer_pow({n}, 2)", v.kind, b * b, 2 * b * l),
        ]
        if b <= 2:
            opts.append((f"jnp.exp({n})", F, np.exp(b), np.exp(b) * l))
        if v.kind == F:
            opts += [
                (f"lax.logistic({n})", F, 1.0, l),
                (f"lax.rsqrt(1.0 + {n} * {n})", F, 1.0, l),
                (f"jnp.sinh(jnp.tanh({n}))", F, 1.2, 1.6 * l),
                (f"{n} * 0.5 + 1", F, b / 2 + 1, l / 2),
                (f"2.0 - {n}", F, b + 2, l),
                (f"lax.convert_element_type({n}, jnp.float32)", F, b, l),
            ]
        else:
            opts += [(f"{n} * 2", I, 2 * b, 0), (f"{n} + 1", I, b + 1, 0),
                     (f"{n} * 0.5", F, b / 2, 0), (f"{n}.astype(jnp.float32) - 0.5", F, b + .5, 0)]
        expr, kind, bound, lip = self.pick(opts)
        return self.new(expr, v.shape, kind, bound, d, lip)

    def unary_kink(self):
        v = self.choose(lambda v: self.kink_ok(v))
        if v is None:
            return None
        n, b, d, l = v.name, v.bound, v.diff, v.lip
        if v.kind == B:
            opts = [(f"~{n}", B, 1), (f"jnp.logical_not({n})", B, 1),
                    (f"{n}.astype(jnp.float32)", F, 1), (f"{n}.astype(jnp.int32) * 3", I, 3),
                    (f"jnp.where({n}, 1.5, -0.5)", F, 1.5)]
        elif v.kind == I:
            opts = [(f"jnp.abs({n})", I, b), (f"jnp.sign({n})", I, 1),
                    (f"jnp.clip({n}, -2, 3)", I, 3), (f"jnp.maximum({n}, 0)", I, b),
                    (f"{n} // 2", I, b), (f"jnp.remainder({n}, 3)", I, 3),
                    (f"{n} > 0", B, 1), (f"{n} == 1", B, 1), (f"{n} % 2 == 0", B, 1),
                    (f"jnp.bitwise_and({n}, 6)", I, 6), (f"{n} >> 1", I, b),
                    (f"{n}.astype(jnp.float32)", F, b)]
        else:
            opts = [(f"jnp.abs({n})", F, b), (f"jnp.floor({n})", F, b + 1),
                    (f"jnp.ceil({n})", F, b + 1), (f"jnp.round({n})", F, b + 1),
                    (f"jnp.trunc({n})", F, b), (f"jnp.sign({n})", F, 1),
                    (f"jnp.clip({n}, -1.0, 1.0)", F, 1), (f"jnp.maximum({n}, 0.0)", F, b),
                    (f"lax.clamp(-0.5, {n}, 1.0)", F, 1),
                    (f"jnp.floor_divide({n}, 0.75)", F, b / 0.75 + 1),
                    (f"jnp.remainder({n}, 1.5)", F, 1.5), (f"jnp.fmod({n}, 1.25)", F, 1.25),
                    (f"{n}.astype(jnp.int32)", I, b), (f"{n} > 0.5", B, 1),
                    (f"{n} <= 0", B, 1), (f"jnp.signbit({n})", B, 1),
                    (f"lax.stop_gradient({n})", F, b),
                    (f"jnp.log(jnp.abs({n}) + 1.0)", F, np.log1p(b)),
                    (f"jnp.sqrt(jnp.abs({n}))", F, np.sqrt(b)),
                    (f"jnp.heaviside({n}, 0.5)", F, 1)]
            if self.mode == "agree":  # singular derivatives at 0: values only
                opts += [(f"jnp.hypot({n}, 0.0)", F, b), (f"jnp.arctan2({n}, 1.0)", F, 1.6)]
        expr, kind, bound = self.pick(opts)
        return self.new(expr, v.shape, kind, bound, d, l)

    def guarded(self):
        """The double-``where`` idiom: the unselected branch is infinite or NaN (or has an
        infinite derivative) where it is not taken, and must not leak into gradients."""
        v = self.choose(lambda v: v.kind == F)
        if v is None:
            return None
        n, b, l = v.name, v.bound, v.lip
        opts = [  # smooth ones (C-infinity, also at the switch point)
            (f"jnp.where({n} > 0, jnp.exp(-1.0 / jnp.where({n} > 0, {n}, 1.0)), 0.0)", 1.0, l),
            (f"jnp.where({n} != 0, jnp.sin({n}) / jnp.where({n} != 0, {n}, 1.0), 1.0)", 1.0,
             0.5 * l),
        ]
        if self.kink_ok(v):  # continuous, but with unbounded slope at the switch point
            opts += [
                (f"jnp.where({n} > 0, jnp.sqrt(jnp.where({n} > 0, {n}, 0.0)), 0.0)",
                 np.sqrt(b), l),
                (f"jnp.where({n} > 0.5, jnp.log(jnp.where({n} > 0.5, {n}, 1.0)), 0.0)",
                 np.log(max(b, 1.0)), l),
                (f"jnp.where({n} > 0, {n} * jnp.log(jnp.where({n} > 0, {n}, 1.0)), 0.0)",
                 max(b * np.log(max(b, 1.0)), 0.4), l),
                (f"jnp.where({n} != 0, 1.0 / jnp.where({n} != 0, {n}, 1.0), 0.0) * "
                 f"jnp.square({n})", b, l),
            ]
        expr, bound, lip = self.pick(opts)
        return self.new(expr, v.shape, F, bound, v.diff, lip)

    def _pair(self, pred=lambda v: True, kink=False):
        a = self.choose(lambda v: pred(v) and (not kink or self.kink_ok(v)))
        if a is None:
            return None
        def ok(v):
            try:
                np.broadcast_shapes(a.shape, v.shape)
            except ValueError:
                return False
            return pred(v) and (not kink or self.kink_ok(v))
        b = self.choose(ok)
        if b is None:
            return None
        return a, b, np.broadcast_shapes(a.shape, b.shape)

    def binary_smooth(self):
        p = self._pair(lambda v: v.kind != B)
        if p is None:
            return None
        a, b, shape = p
        x, y, ba, bb, la, lb = a.name, b.name, a.bound, b.bound, a.lip, b.lip
        k = _join(a.kind, b.kind)
        opts = [
            (f"{x} + {y}", k, ba + bb, la + lb), (f"jnp.add({x}, {y})", k, ba + bb, la + lb),
            (f"{x} - {y}", k, ba + bb, la + lb), (f"jnp.subtract({x}, {y})", k, ba + bb, la + lb),
            (f"{x} * {y}", k, ba * bb, la * bb + lb * ba),
            (f"jnp.multiply({x}, {y})", k, ba * bb, la * bb + lb * ba),
            (f"{x} / (1.0 + {y} * {y})", F, ba, la + lb * ba),
            (f"jnp.logaddexp({x}, {y})", F, max(ba, bb) + 0.7, la + lb),
            (f"jnp.hypot({x}, jnp.square({y}) + 0.5)", F, ba + bb * bb + 0.5, la + 2 * bb * lb),
            (f"jnp.arctan2({x}, jnp.square({y}) + 0.5)", F, 1.6, 2 * la + 2 * bb * lb),
            (f"jnp.sin({x}) * jnp.cos({y})", F, 1.0, la + lb),
            (f"jnp.tanh({x} - {y})", F, 1.0, la + lb),
        ]
        expr, kind, bound, lip = self.pick(opts)
        return self.new(expr, shape, kind, bound, a.diff or b.diff, lip)

    def binary_kink(self):
        p = self._pair(lambda v: v.kind != B, kink=True)
        if p is None:
            return None
        a, b, shape = p
        x, y, ba, bb = a.name, b.name, a.bound, b.bound
        k = _join(a.kind, b.kind)
        opts = [(f"jnp.maximum({x}, {y})", k, max(ba, bb)),
                (f"jnp.minimum({x}, {y})", k, max(ba, bb)),
                (f"{x} > {y}", B, 1), (f"{x} == {y}", B, 1), (f"jnp.less_equal({x}, {y})", B, 1),
                (f"jnp.fmax({x}, {y})", k, max(ba, bb))]
        if k == F:
            opts += [(f"jnp.copysign({x}, {y})", F, ba),
                     (f"jnp.where({x} > {y}, {x}, {y} * 0.5)", F, max(ba, bb))]
        if self.mode == "agree":
            opts += [(f"jnp.hypot({x}, {y})", F, ba + bb), (f"jnp.arctan2({x}, {y})", F, 3.2)]
        if a.kind == I and b.kind == I:
            opts += [(f"jnp.floor_divide({x}, jnp.abs({y}) + 1)", I, ba),
                     (f"jnp.remainder({x}, jnp.abs({y}) + 1)", I, bb + 1),
                     (f"{x} & {y}", I, max(ba, bb) * 2), (f"{x} ^ {y}", I, max(ba, bb) * 2)]
        expr, kind, bound = self.pick(opts)
        return self.new(expr, shape, kind, bound, a.diff or b.diff, a.lip + b.lip)

    def where(self):
        c = self.choose(lambda v: v.kind == B or (v.kind != B and self.kink_ok(v)))
        if c is None:
            return None
        cond = c.name if c.kind == B else self.pick([f"{c.name} > 0", f"{c.name} < 0.5",
                                                     f"{c.name} != 0"])
        def fits(v, *others):
            try:
                np.broadcast_shapes(*(o.shape for o in others), v.shape)
                return True
            except ValueError:
                return False
        a = self.choose(lambda v: v.kind != B and fits(v, c))
        if a is None:
            return None
        if self.coin(0.3):
            bexpr, bshape, bkind, bb, bd, bl = ("0.0", (), F, 0.0, False, 0.0) if a.kind == F \
                else ("-1", (), I, 1.0, False, 0.0)
        else:
            b = self.choose(lambda v: v.kind != B and fits(v, c, a))
            if b is None:
                return None
            bexpr, bshape, bkind, bb, bd, bl = b.name, b.shape, b.kind, b.bound, b.diff, b.lip
        shape = np.broadcast_shapes(c.shape, a.shape, bshape)
        if self.coin(0.3) and a.shape == bshape == shape and a.kind == bkind \
                and bexpr[0] == "v" and c.shape in ((), shape):
            # lax.select_n(pred, on_false, on_true): strict shapes and dtypes.
            expr = f"lax.select_n({cond}, {bexpr}, {a.name})"
        else:
            expr = f"jnp.where({cond}, {a.name}, {bexpr})"
        return self.new(expr, shape, _join(a.kind, bkind), max(a.bound, bb), a.diff or bd,
                        max(a.lip, bl))

    def select_n3(self):
        i = self.choose(lambda v: v.kind == I)
        a = self.choose(lambda v: v.kind == F and i is not None and v.shape == i.shape)
        if a is None:
            return None
        b = self.choose(lambda v: v.kind == F and v.shape == a.shape)
        c = self.choose(lambda v: v.kind == F and v.shape == a.shape, exclude=(b.name,))
        c = c if c is not None else a
        expr = f"lax.select_n(jnp.clip({i.name}, 0, 2), {a.name}, {b.name}, {c.name})"
        return self.new(expr, a.shape, F, max(a.bound, b.bound, c.bound),
                        a.diff or b.diff or c.diff, max(a.lip, b.lip, c.lip))

    def reduction(self):
        v = self.choose()
        if v is None:
            return None
        axis = None if v.ndim == 0 or self.coin(0.25) else int(self.rng.integers(-v.ndim, v.ndim))
        kd = self.coin(0.3)
        ax = tuple(range(v.ndim)) if axis is None else (axis % v.ndim,)
        n = int(np.prod([v.shape[a] for a in ax], dtype=int))
        shape = tuple(1 if i in ax else s for i, s in enumerate(v.shape)) if kd else \
            tuple(s for i, s in enumerate(v.shape) if i not in ax)
        args = f"{v.name}" + ("" if axis is None else f", axis={axis}") + (
            ", keepdims=True" if kd else "")
        b, l = v.bound, v.lip
        if v.kind == B:
            opts = [(f"jnp.any({args})", B, 1, False), (f"jnp.all({args})", B, 1, False),
                    (f"jnp.sum({args})", I, n, False), (f"jnp.mean({args})", F, 1, False)]
        else:
            opts = [(f"jnp.sum({args})", v.kind, n * b, n * l),
                    (f"{v.name}.sum({args[len(v.name) + 2:]})", v.kind, n * b, n * l),
                    (f"jnp.mean({args})", F, b, l), (f"jnp.var({args})", F, b * b, 4 * b * l),
                    (f"jnp.prod({args})", v.kind, b ** n, n * max(b, 1) ** (n - 1) * l)]
            if self.kink_ok(v):
                opts += [(f"jnp.max({args})", v.kind, b, l), (f"jnp.min({args})", v.kind, b, l),
                         (f"jnp.argmax({v.name}" + ("" if axis is None else f", axis={axis}")
                          + (", keepdims=True" if kd else "") + ")", I, max(v.shape or (1,)), 0)]
                if axis is not None and not kd:
                    opts.append((f"lax.reduce_max({v.name}, ({axis % v.ndim},))", v.kind, b, l))
        expr, kind, bound, lip = self.pick(opts)
        return self.new(expr, shape, kind, bound, v.diff, lip)

    def shape_op(self):
        v = self.choose()
        if v is None:
            return None
        n, shp = v.name, v.shape
        opts = []
        # reshape
        size = v.size
        cands = [s for s in [(size,), (1, size), (size, 1), (2, size // 2), (size // 2, 2),
                             (3, size // 3), (-1,), (1, -1, 1)]
                 if all(d != 0 for d in s) and (-1 in s or np.prod(s) == size)]
        if size % 2:
            cands = [s for s in cands if 2 not in s]
        if size % 3:
            cands = [s for s in cands if 3 not in s]
        if cands:
            s = self.pick(cands)
            opts.append(self.pick([f"jnp.reshape({n}, {s})", f"{n}.reshape({s})"]))
        if v.ndim >= 2:
            perm = tuple(int(p) for p in self.rng.permutation(v.ndim))
            opts += [f"jnp.transpose({n}, {perm})", f"{n}.T", f"jnp.swapaxes({n}, 0, -1)",
                     f"jnp.moveaxis({n}, 0, -1)"]
        k = int(self.rng.integers(-v.ndim - 1, v.ndim + 1))
        opts += [f"jnp.expand_dims({n}, {k})", f"{n}[None]", f"{n}[..., None]"]
        ones = [i for i, s in enumerate(shp) if s == 1]
        if ones:
            opts.append(f"jnp.squeeze({n}, axis={self.pick(ones)})")
        if v.ndim:
            ax = int(self.rng.integers(-v.ndim, v.ndim))
            opts += [f"jnp.flip({n}, axis={ax})", f"jnp.flip({n})",
                     f"jnp.roll({n}, {int(self.rng.integers(-3, 4))}, axis={ax})",
                     f"jnp.roll({n}, {int(self.rng.integers(-3, 4))})",
                     f"lax.rev({n}, ({ax % v.ndim},))",
                     f"jnp.repeat({n}, 2, axis={ax})"]
            # static basic slicing
            idx = []
            for s in shp:
                r = self.rng.random()
                if r < 0.25 and s > 1:
                    idx.append(int(self.rng.integers(-s, s)))
                elif r < 0.6:
                    lo = int(self.rng.integers(0, s))
                    step = self.pick([1, 1, 2, -1])
                    idx.append(slice(lo, None, step if step != 1 else None) if step > 0
                               else slice(None, None, -1))
                else:
                    idx.append(slice(None))
            if self.coin(0.2):
                idx.insert(int(self.rng.integers(0, len(idx) + 1)), None)
            opts += [f"{n}[{_idx_src(tuple(idx))}]"] * 2
            # lax.pad with negative and interior padding
            cfg = [(int(self.rng.integers(-1, 2)) if s > 1 else int(self.rng.integers(0, 2)),
                    int(self.rng.integers(-1, 2)) if s > 1 else int(self.rng.integers(0, 2)),
                    int(self.rng.integers(0, 2))) for s in shp]
            pv = {F: "0.0", I: "0", B: "False"}[v.kind]
            opts.append(f"lax.pad({n}, jnp.asarray({pv}, {n}.dtype), {cfg})")
            # dynamic_slice with static (possibly out-of-range: clamped) starts
            sizes = tuple(int(self.rng.integers(1, s + 1)) for s in shp)
            starts = tuple(int(self.rng.integers(0, s + 2)) for s in shp)
            opts.append(f"lax.dynamic_slice({n}, {starts}, {sizes})")
        tgt = shp if not shp or self.coin() else (2,) + shp
        tgt = tuple(3 if s == 1 and self.coin() else s for s in tgt)
        opts.append(f"jnp.broadcast_to({n}, {tgt})")
        expr = self.pick(opts)
        shape = self._shape_of(expr, v)
        if 0 in shape:
            return None
        return self.new(expr, shape, v.kind, v.bound, v.diff, v.lip)

    @staticmethod
    def _shape_of(expr, v):
        """Result shape of a shape-only expression, by running it on NumPy / a lax shim."""
        class _Lax:
            @staticmethod
            def rev(x, dims):
                return np.flip(x, dims)

            @staticmethod
            def pad(x, pv, cfg):
                shape = tuple(lo + hi + s + max(s - 1, 0) * it
                              for s, (lo, hi, it) in zip(x.shape, cfg))
                return np.empty(shape)

            @staticmethod
            def dynamic_slice(x, starts, sizes):
                return np.empty(sizes)

        class _Jnp:
            def __getattr__(self, name):
                return getattr(np, name)

            @staticmethod
            def array(x):
                return np.array(x)

            @staticmethod
            def asarray(x, dtype=None):
                return np.asarray(x)
        return np.shape(eval(expr, {"jnp": _Jnp(), "lax": _Lax, "np": np},  # noqa: S307
                             {v.name: np.zeros(v.shape)}))

    def join_op(self):
        a = self.choose(lambda v: v.ndim >= 1)
        if a is None:
            return None
        if self.coin():  # stack
            b = self.choose(lambda v: v.shape == a.shape and (v.kind == B) == (a.kind == B))
            ax = int(self.rng.integers(-a.ndim - 1, a.ndim + 1))
            expr = f"jnp.stack([{a.name}, {b.name}], axis={ax})"
            shape = np.stack([np.empty(a.shape), np.empty(b.shape)], axis=ax).shape
        else:
            ax = int(self.rng.integers(0, a.ndim))
            b = self.choose(lambda v: v.ndim == a.ndim and (v.kind == B) == (a.kind == B) and all(
                s == t for i, (s, t) in enumerate(zip(v.shape, a.shape)) if i != ax))
            axis = ax - a.ndim if self.coin() else ax
            expr = f"jnp.concatenate([{a.name}, {b.name}], axis={axis})"
            shape = np.concatenate([np.empty(a.shape), np.empty(b.shape)], axis=ax).shape
        return self.new(expr, shape, _join(a.kind, b.kind), max(a.bound, b.bound),
                        a.diff or b.diff, max(a.lip, b.lip))

    def product(self):
        num = lambda v: v.kind != B  # noqa: E731
        a = self.choose(lambda v: num(v) and v.ndim in (1, 2))
        if a is None:
            return None
        forms = []
        for b in self.pool:
            if not num(b) or b.ndim not in (1, 2):
                continue
            x, y = a.name, b.name
            if a.ndim == 1 and b.ndim == 1 and a.shape == b.shape:
                forms += [(f"jnp.dot({x}, {y})", (), a.shape[0], b),
                          (f"{x} @ {y}", (), a.shape[0], b),
                          (f"jnp.einsum('i,i->', {x}, {y})", (), a.shape[0], b),
                          (f"jnp.vdot({x}, {y})", (), a.shape[0], b)]
            if a.ndim == 1 and b.ndim == 1:
                forms += [(f"jnp.outer({x}, {y})", a.shape + b.shape, 1, b)]
            if a.ndim == 2 and b.ndim == 1 and a.shape[1] == b.shape[0]:
                forms += [(f"{x} @ {y}", a.shape[:1], b.shape[0], b),
                          (f"jnp.dot({x}, {y})", a.shape[:1], b.shape[0], b),
                          (f"jnp.einsum('ij,j->i', {x}, {y})", a.shape[:1], b.shape[0], b)]
            if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0]:
                forms += [(f"jnp.matmul({x}, {y})", (a.shape[0], b.shape[1]), a.shape[1], b)]
            if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[1]:
                forms += [(f"jnp.einsum('ij,kj->ik', {x}, {y})", (a.shape[0], b.shape[0]),
                           a.shape[1], b),
                          (f"{x} @ {y}.T", (a.shape[0], b.shape[0]), a.shape[1], b)]
            if a.ndim == 2 and b.ndim == 2 and a.shape == b.shape:
                forms += [(f"jnp.einsum('ij,ij->j', {x}, {y})", a.shape[1:], a.shape[0], b),
                          (f"jnp.tensordot({x}, {y}, axes=2)", (), a.size, b)]
        if not forms:
            return None
        expr, shape, k, b = self.pick(forms)
        return self.new(expr, shape, _join(a.kind, b.kind), k * a.bound * b.bound,
                        a.diff or b.diff, k * (a.lip * b.bound + b.lip * a.bound))

    def cumulative(self):
        v = self.choose(lambda v: v.ndim >= 1)
        if v is None:
            return None
        ax = int(self.rng.integers(-v.ndim, v.ndim))
        n, b, l, s = v.name, v.bound, v.lip, v.shape[ax]
        if v.kind == B:
            opts = [(f"jnp.cumsum({n}, axis={ax})", I, s, 0)]
        else:
            opts = [(f"jnp.cumsum({n}, axis={ax})", v.kind, s * b, s * l),
                    (f"lax.cumsum({n}, axis={ax % v.ndim})", v.kind, s * b, s * l),
                    (f"jnp.cumprod({n}, axis={ax})", v.kind, max(b, 1) ** s,
                     s * max(b, 1) ** (s - 1) * l)]
            if self.kink_ok(v):
                opts += [(f"lax.cummax({n}, axis={ax % v.ndim})", v.kind, b, l),
                         (f"jnp.sort({n}, axis={ax})", v.kind, b, l),
                         (f"jnp.argsort({n}, axis={ax})", I, s, 0),
                         (f"jnp.take_along_axis({n}, jnp.argsort({n}, axis={ax}), axis={ax})",
                          v.kind, b, l)]
                if v.shape[-1] >= 2:
                    opts.append((f"lax.top_k({n}, 2)[0]", v.kind, b, l))
        expr, kind, bound, lip = self.pick(opts)
        shape = v.shape if "top_k" not in expr else v.shape[:-1] + (2,)
        return self.new(expr, shape, kind, bound, v.diff, lip)

    def gather(self):
        v = self.choose(lambda v: v.ndim >= 1)
        if v is None:
            return None
        ax = int(self.rng.integers(0, v.ndim))
        s = v.shape[ax]
        idx = self.rng.integers(-s, s, int(self.rng.integers(1, 4)))
        arr = f"jnp.array({idx.tolist()})"
        opts = [f"jnp.take({v.name}, {arr}, axis={ax})"]
        if ax == 0:
            opts.append(f"{v.name}[{arr}]")
        if ax == 1:
            opts.append(f"{v.name}[:, {arr}]")
        expr = self.pick(opts)
        shape = np.take(np.empty(v.shape), idx, axis=ax).shape
        return self.new(expr, shape, v.kind, v.bound, v.diff, v.lip)

    def at_update(self):
        v = self.choose(lambda v: v.ndim >= 1 and v.kind != B)
        if v is None:
            return None
        s0 = v.shape[0]
        method = self.pick(["set", "add", "add", "multiply"] + (["max"] if self.kink_ok(v) else []))
        forms = [(int(self.rng.integers(-s0, s0)),), (slice(int(self.rng.integers(0, s0)), None),)]
        if v.ndim >= 2:
            forms.append((slice(None), int(self.rng.integers(0, v.shape[1]))))
            forms.append((Ellipsis, -1))
        fancy = self.rng.integers(0, s0, 2)
        # (JAX has no gradient of a multiply-scatter through an index array.)
        if (method != "set" or fancy[0] != fancy[1]) and (method != "multiply"
                                                          or self.mode == "agree"):
            forms.append((fancy,))
        idx = self.pick(forms)
        sub = np.empty(v.shape)[idx].shape
        def fits(u):
            try:
                return np.broadcast_shapes(u.shape, sub) == sub
            except ValueError:
                return False
        u = self.choose(lambda u: u.kind != B and (u.kind == I or v.kind == F) and fits(u)
                        and (method != "max" or self.kink_ok(u)))
        if u is None or self.coin(0.25):
            uexpr, ub, ud, ul = ("1.5" if v.kind == F else "2"), 2.0, False, 0.0
        else:
            uexpr, ub, ud, ul = u.name, u.bound, u.diff, u.lip
        bound = {"set": max(v.bound, ub), "add": v.bound + 2 * ub, "max": max(v.bound, ub),
                 "multiply": v.bound * max(ub, 1) ** 2}[method]
        expr = f"{v.name}.at[{_idx_src(idx)}].{method}({uexpr})"
        return self.new(expr, v.shape, v.kind, bound, v.diff or ud,
                        v.lip + ul * (v.bound + 1) * 2)

    def lax_slice_update(self):
        v = self.choose(lambda v: v.ndim >= 1 and v.kind != B)
        if v is None:
            return None
        u = self.choose(lambda u: u.ndim == v.ndim and u.kind != B
                        and all(a <= b for a, b in zip(u.shape, v.shape)))
        if u is None:
            return None
        starts = tuple(int(self.rng.integers(0, s + 2)) for s in v.shape)
        expr = f"lax.dynamic_update_slice({v.name}, {u.name}.astype({v.name}.dtype), {starts})"
        return self.new(expr, v.shape, v.kind, max(v.bound, u.bound), v.diff or u.diff,
                        max(v.lip, u.lip))

    def constant(self):
        shp = self.pick(SHAPES)
        opts = [("jnp.asarray(0.5)", (), F, 0.5), (f"jnp.full({shp}, 2)", shp, I, 2),
                (f"jnp.full({shp}, -1.5)", shp, F, 1.5), (f"jnp.ones({shp})", shp, F, 1),
                ("jnp.arange(3)", (3,), I, 2), ("jnp.arange(3.0) * 0.5", (3,), F, 1)]
        v = self.choose()
        if v is not None:
            opts += [(f"jnp.zeros_like({v.name})", v.shape, v.kind, 0),
                     (f"jnp.ones_like({v.name}) * 2", v.shape, I if v.kind == B else v.kind, 2)]
        expr, shape, kind, bound = self.pick(opts)
        return self.new(expr, shape, kind, bound, False)

    FAMILIES = {  # name: (weight in agree/ad, weight in smooth)
        "unary_smooth": (4, 6), "unary_kink": (3, 1), "binary_smooth": (4, 5),
        "binary_kink": (2, 1), "where": (2, 2), "select_n3": (0.5, 0.5), "reduction": (2, 2),
        "shape_op": (3, 3), "join_op": (1, 1), "product": (1.5, 1.5), "cumulative": (1.5, 1),
        "gather": (1, 1), "at_update": (1.5, 1.5), "lax_slice_update": (0.5, 0.5),
        "constant": (0.5, 0.3), "guarded": (1.5, 1),
    }

    def step(self):
        names = list(self.FAMILIES)
        w = np.array([self.FAMILIES[n][self.mode == "smooth"] for n in names], float)
        for _ in range(50):
            fam = names[int(self.rng.choice(len(names), p=w / w.sum()))]
            got = getattr(self, fam)()
            if got is not None:
                expr, v = got
                self.steps.append((v.name, expr))
                self.vals[v.name] = v
                self.pool.append(v)
                return v
        raise RuntimeError("no op applicable")

    def build(self):
        if self.mode == "agree":
            for _ in range(int(self.rng.integers(1, 4))):
                kind = self.pick([F, F, F, F, I, I, B])
                self.add_input(self.pick(SHAPES), kind, "x")
            if not any(v.kind == F for v, _ in self.inputs):
                self.add_input(self.pick(SHAPES), F, "x")
        else:
            for _ in range(int(self.rng.integers(1, 3))):
                self.add_input(self.pick(SHAPES), F, "x")
            for _ in range(int(self.rng.integers(0, 3))):
                self.add_input(self.pick(SHAPES), self.pick([F, F, I, B]), "c")
        nsteps = int(self.rng.integers(3, 7))
        for _ in range(nsteps):
            self.step()
        ad = self.mode != "agree"
        last = self.pool[-1]
        for _ in range(10):  # the last value should carry the derivative in the AD modes
            if not ad or (last.kind == F and last.diff):
                break
            last = self.step()
        outs = [last.name]
        made = [v for v in self.pool[len(self.inputs):-1]]
        for v in made:
            if self.coin(0.3 if len(outs) < 3 else 0.0):
                outs.append(v.name)
        if ad and not self.vals[outs[0]].diff:
            diffs = [v.name for v in self.pool if v.kind == F and v.diff]
            if diffs[-1] in made:
                outs.insert(0, diffs[-1])
            else:
                expr, v = self.new(f"jnp.sin({diffs[-1]})", self.vals[diffs[-1]].shape, F, 1,
                                   True, 1)
                self.steps.append((v.name, expr))
                self.vals[v.name] = v
                outs.insert(0, v.name)
        return Program(self.seed, self.mode, self.inputs, self.steps, outs, self.vals)


def generate(seed, mode):
    return Gen(seed, mode).build()


# --- comparisons ------------------------------------------------------------------------------
def _weak(x):
    return bool(x.aval.weak_type)


def assert_same(got, want, what, rtol=2e-5, atol=2e-5, dtype=True):
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
    if dtype:
        assert g.dtype == w.dtype, f"{what}: dtype {g.dtype} != {w.dtype}"
    if g.dtype.kind == "f":
        scale = max(1.0, float(np.max(np.abs(w), initial=0.0)))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale, equal_nan=False,
                                   err_msg=what)
    elif g.dtype.kind != "V":
        np.testing.assert_array_equal(g, w, err_msg=what)


@contextlib.contextmanager
def annotated(prog, **extra):
    try:
        yield
    except BaseException as e:
        if hasattr(e, "add_note"):
            e.add_note(str(prog) + "".join(f"\n{k} = {v!r}" for k, v in extra.items()))
        raise


# --- tests ------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(N_AGREE))
def test_eager_jit_vmap_agree(seed):
    prog = generate(seed, "agree")
    inputs = prog.sample_inputs()
    xs = [inputs[v.name] for v in prog.args]
    f = prog.fun()
    with annotated(prog, inputs=inputs):
        eager = f(*xs)
        for name, out in zip(prog.outputs, eager):
            v = prog.vals[name]
            assert isinstance(out, plax.Array), (name, type(out))
            assert out.shape == v.shape, f"{name}: shape {out.shape}, NumPy rules give {v.shape}"
            assert out.dtype == KIND_DTYPE[v.kind], f"{name}: dtype {out.dtype}, want {v.kind}"
            assert np.all(np.isfinite(np.asarray(out))), f"{name} not finite: {out}"
        # vmap: a random subset of the arguments gets a batch axis (mostly leading). One
        # compile holds the jitted program, its vmap and the program applied to each slice;
        # vmap also runs eagerly for every tenth seed.
        rng = np.random.default_rng(20_000 + seed)
        axes = [0 if rng.random() < 0.7 else (None if rng.random() < 0.6 or not v.ndim else -1)
                for v in prog.args]
        if all(a is None for a in axes):
            axes[0] = 0
        bxs = [x if a is None else np.moveaxis(prog.sample(v, rng, BATCH), 0, a)
               for x, v, a in zip(xs, prog.args, axes)]
        vf = plax.vmap(f, in_axes=tuple(axes))

        def all_at_once(xs, bxs):
            per = [f(*[x if a is None else jnp.take(x, i, axis=a) for x, a in zip(bxs, axes)])
                   for i in range(BATCH)]
            return f(*xs), vf(*bxs), per
        jitted, jit_vmapped, per = plax.jit(all_at_once)(xs, bxs)
        for name, e, j in zip(prog.outputs, eager, jitted):
            assert_same(j, e, f"jit vs eager, {name}")
            assert _weak(j) == _weak(e), f"{name}: weak type jit {_weak(j)} eager {_weak(e)}"
        for how, batched in [("jit(vmap)", jit_vmapped)] + (
                [("vmap", vf(*bxs))] if seed % 10 == 0 else []):
            for k, name in enumerate(prog.outputs):
                want = np.stack([np.asarray(p[k]) for p in per])
                assert_same(batched[k], want, f"{how}(in_axes={axes}) vs slices, {name}")


def _tangents(prog, seed):
    rng = np.random.default_rng(30_000 + seed)
    return tuple(rng.standard_normal(v.shape).astype(np.float32) for v in prog.args)


@pytest.mark.parametrize("seed", range(N_SMOOTH))
def test_smooth_grads(seed):
    """check_grads on the jitted loss (one compile per derivative; the finite differences
    hit the cache). The eager autodiff path is exercised by test_autodiff_any_ops."""
    prog = generate(1_000 + seed, "smooth")
    inputs = prog.sample_inputs()
    consts = {v.name: inputs[v.name] for v in prog.consts}
    xs = tuple(inputs[v.name] for v in prog.args)
    with annotated(prog, inputs=inputs):
        check_grads(plax.jit(prog.loss(consts)), xs, order=2 if seed % 6 == 0 else 1,
                    modes=("fwd", "rev"), eps=1e-2, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("seed", range(N_AD))
def test_autodiff_any_ops(seed):
    """Kinked and zero-derivative ops on the differentiated path, at inputs often on the
    kinks: eager grad is finite and equals jit(grad); jvp == linearize (all outputs; integer
    and bool ones get float0 tangents); vjp is the transpose of jvp. Everything but the
    eager grad runs in one jitted function (one compile)."""
    prog = generate(2_000 + seed, "ad")
    inputs = prog.sample_inputs()
    consts = {v.name: inputs[v.name] for v in prog.consts}
    xs = tuple(inputs[v.name] for v in prog.args)
    ts = _tangents(prog, seed)
    argnums = tuple(range(len(xs)))
    fl = prog.float_outputs()
    rng = np.random.default_rng(40_000 + seed)
    cts = tuple(rng.standard_normal(prog.vals[o].shape).astype(np.float32) for o in fl)
    loss, fun, ffun = prog.loss(consts), prog.fun(consts), prog.fun(consts, fl)

    def derivatives(xs, ts, cts):
        out, tan = plax.jvp(fun, xs, ts)
        out_l, f_jvp = plax.linearize(fun, *xs)
        _, f_vjp = plax.vjp(ffun, *xs)
        return (plax.grad(loss, argnums=argnums)(*xs), out, tan, out_l, f_jvp(*ts),
                f_vjp(cts))

    with annotated(prog, inputs=inputs):
        g = plax.grad(loss, argnums=argnums)(*xs)
        for x, gi in zip(xs, g):
            assert gi.shape == x.shape and gi.dtype == np.float32
            assert np.all(np.isfinite(np.asarray(gi))), f"non-finite gradient {gi}"
        gj, out, tan, out_l, tan_l, ct_in = plax.jit(derivatives)(xs, ts, cts)
        for gi, gji in zip(g, gj):
            assert_same(gji, gi, "jit(grad) vs grad", rtol=1e-4, atol=1e-4)
        eager_out = fun(*xs)
        for name, e, o, t, ol, tl in zip(prog.outputs, eager_out, out, tan, out_l, tan_l):
            want = np.float32 if prog.vals[name].kind == F else plax.dtypes.float0
            assert np.asarray(t).dtype == want, f"{name}: tangent dtype {np.asarray(t).dtype}"
            assert np.asarray(tl).dtype == want, f"{name}: linearize tangent dtype"
            assert np.shape(t) == np.shape(tl) == e.shape, f"{name}: tangent shape"
            assert_same(o, e, f"jvp primal vs eager, {name}")
            assert_same(ol, e, f"linearize primal vs eager, {name}")
            if want == np.float32:
                assert np.all(np.isfinite(np.asarray(t))), f"{name}: non-finite tangent {t}"
                assert_same(tl, t, f"linearize tangent vs jvp, {name}", rtol=1e-4, atol=1e-4)
        # <t, vjp(ct)> == <jvp(t), ct> over the float outputs.
        lhs = sum(float(np.vdot(t, np.asarray(c))) for t, c in zip(ts, ct_in))
        ftan = [t for name, t in zip(prog.outputs, tan) if name in fl]
        rhs = sum(float(np.vdot(np.asarray(t), c)) for t, c in zip(ftan, cts))
        np.testing.assert_allclose(lhs, rhs, rtol=1e-4, atol=1e-4 * max(1.0, abs(rhs)),
                                   err_msg="vjp is not the transpose of jvp")


if __name__ == "__main__":
    _mode, _seed = sys.argv[1], int(sys.argv[2])
    _prog = generate({"agree": 0, "smooth": 1_000, "ad": 2_000}[_mode] + _seed, _mode)
    print(_prog)
    print("inputs =", _prog.sample_inputs())
