"""One table of higher-order primitives; every transformation is checked on every row.

A row builds two outputs through one higher-order primitive of the public API and
names the same program unrolled in NumPy (float64). Each test below is parametrized
over the rows, so a new higher-order primitive gets every check by adding one row:

* its value eagerly, under ``jit`` and under ``vmap`` (against a loop of the reference);
* ``jvp``, ``vjp``, ``linearize`` and grad-of-grad against central differences of the
  reference (a row without forward or reverse mode asserts JAX's error instead);
* dead-code elimination of a program using one of the two outputs: the result still
  evaluates to the reference, and the primitive's bodies lost the unused work.
"""
import dataclasses
from typing import Callable

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.api_util import debug_info
from plax.core.dce import dce_closed
from plax.core.jaxpr import eval_closed_jaxpr, open_jaxpr, subjaxprs
from plax.extend import linear_util as lu
from plax.extend.core.primitives import call_p, closed_call_p
from plax.sharding import Mesh, PartitionSpec as P

RTOL, ATOL = 1e-4, 1e-5
_WHILE_REVERSE = (ValueError, "Reverse-mode differentiation does not work for lax.while_loop")
_CUSTOM_VJP_FORWARD = (TypeError,
                       r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function")


@dataclasses.dataclass(frozen=True)
class Row:
    """A higher-order primitive's row: ``fn(x, y) -> (a, b)`` built with it, and ``ref`` the
    same program in NumPy. ``no_forward`` / ``no_reverse``: (exception type, message regex)
    JAX raises where the primitive has no forward / reverse mode."""
    name: str
    fn: Callable
    ref: Callable
    args: tuple
    no_forward: tuple | None = None
    no_reverse: tuple | None = None

    def __str__(self):
        return self.name


# The two outputs of each row are computed apart, so using only the first leaves the
# second's work dead. ``m`` is plax.numpy or numpy: one body serves plax and the reference.
def _branches(m):
    return [lambda x, y: (x * y, m.exp(y)),
            lambda x, y: (m.sin(x) * y, m.cos(y) * x),
            lambda x, y: (x + y, m.tanh(y) * x)]


def _sin_exp(m, x, y):
    return m.sin(x) * y, x * m.exp(y)


def _cond(x, y):
    return lax.cond(jnp.sum(x) > 0, _branches(jnp)[1], _branches(jnp)[0], x, y)


def _cond_ref(x, y):
    return _branches(np)[1 if np.sum(x) > 0 else 0](x, y)


def _switch_index(m, x):
    return (x[0] > 0).astype(m.int32) + (x[-1] > 0).astype(m.int32)


def _switch(x, y):
    return lax.switch(_switch_index(jnp, x), _branches(jnp), x, y)


def _switch_ref(x, y):
    return _branches(np)[_switch_index(np, x)](x, y)


def _loop_step(m, x, y, i, a, b):
    return a * m.cos(y) + x * i, b + m.sin(a)


def _while(x, y):
    def body(c):
        i, a, b = c
        return (i + 1, *_loop_step(jnp, x, y, i, a, b))
    _, a, b = lax.while_loop(lambda c: c[0] < 3, body, (0, x, y))
    return a, b


def _loop_ref(x, y):
    a, b = x, y
    for i in range(3):
        a, b = _loop_step(np, x, y, i, a, b)
    return a, b


def _fori_concrete(x, y):  # concrete bounds: a scan
    return lax.fori_loop(0, 3, lambda i, c: _loop_step(jnp, x, y, i, *c), (x, y))


# Bounds traced under the jit (a while): no reverse mode, even eagerly.
_fori_jitted = plax.jit(
    lambda x, y, n: lax.fori_loop(0, n, lambda i, c: _loop_step(jnp, x, y, i, *c), (x, y)))


def _scan_step(m, c, xi):
    c2 = c * m.cos(xi) + m.sin(c)
    return c2, (c2 * xi, m.exp(-c * xi))


def _scan(x, y):
    c, (ys1, ys2) = lax.scan(lambda c, xi: _scan_step(jnp, c, xi), y, x)
    return c + ys1[-1], ys2


def _scan_ref(x, y):
    c, ys1, ys2 = y, [], []
    for xi in x:
        c, (o1, o2) = _scan_step(np, c, xi)
        ys1.append(o1)
        ys2.append(o2)
    return c + ys1[-1], np.stack(ys2)


_nested_jit = plax.jit(lambda x, y: (jnp.sin(x) * y, jnp.cos(x + y)))


@plax.custom_jvp
def _cj(x, y):
    return _sin_exp(jnp, x, y)


@_cj.defjvp
def _cj_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return _cj(x, y), (jnp.cos(x) * y * tx + jnp.sin(x) * ty,
                       jnp.exp(y) * tx + x * jnp.exp(y) * ty)


@plax.custom_vjp
def _cv(x, y):
    return _sin_exp(jnp, x, y)


def _cv_bwd(res, ct):
    (x, y), (ca, cb) = res, ct
    return (ca * jnp.cos(x) * y + cb * jnp.exp(y), ca * jnp.sin(x) + cb * x * jnp.exp(y))


_cv.defvjp(lambda x, y: (_cv(x, y), (x, y)), _cv_bwd)

_MESH = Mesh(np.array(plax.devices()), ("i",))  # however many devices exist


def _shard_map(x, y):
    body = lambda x, y: (jnp.sin(x) * y, x * lax.psum(y, "i"))
    return plax.shard_map(body, mesh=_MESH, in_specs=(P("i"), P("i")),
                          out_specs=(P("i"), P("i")))(x, y)


_X = np.array([0.3, -0.2, 0.5], np.float32)
_Y = np.array([0.7, 0.1, -0.4], np.float32)


def _call_body(x, y):
    return [jnp.sin(x) * y, jnp.cos(x) * jnp.exp(y)]


_CALL_JAXPR = plax.make_jaxpr(_call_body)(_X, _Y)


def _closed_call(x, y):  # as a jaxpr's evaluation binds it: the ClosedJaxpr as a parameter
    return tuple(closed_call_p.bind(x, y, call_jaxpr=_CALL_JAXPR))


def _call(x, y):  # as JAX's call_p is bound: with a WrappedFun, traced into the equation
    fun = lu.wrap_init(_call_body, debug_info=debug_info("call", _call_body, (x, y), {}))
    return tuple(call_p.bind(fun, x, y))

_N = len(plax.devices())
_XS = np.linspace(-0.5, 0.6, _N).astype(np.float32)
_YS = np.linspace(0.4, -0.3, _N).astype(np.float32)

ROWS = [
    Row("cond", _cond, _cond_ref, (_X, _Y)),
    Row("switch", _switch, _switch_ref, (_X, _Y)),
    Row("while_loop", _while, _loop_ref, (_X, _Y), no_reverse=_WHILE_REVERSE),
    Row("fori_loop_concrete_bounds", _fori_concrete, _loop_ref, (_X, _Y)),
    Row("fori_loop_traced_bounds", lambda x, y: _fori_jitted(x, y, 3), _loop_ref, (_X, _Y),
        no_reverse=_WHILE_REVERSE),
    Row("scan", _scan, _scan_ref, (_X, _Y)),
    Row("jit", _nested_jit, lambda x, y: (np.sin(x) * y, np.cos(x + y)), (_X, _Y)),
    Row("checkpoint",
        plax.checkpoint(lambda x, y: (jnp.sin(x) * y, jnp.cos(x) * jnp.exp(y))),
        lambda x, y: (np.sin(x) * y, np.cos(x) * np.exp(y)), (_X, _Y)),
    Row("closed_call", _closed_call, lambda x, y: (np.sin(x) * y, np.cos(x) * np.exp(y)),
        (_X, _Y)),
    Row("call", _call, lambda x, y: (np.sin(x) * y, np.cos(x) * np.exp(y)), (_X, _Y)),
    Row("custom_jvp", _cj, lambda x, y: _sin_exp(np, x, y), (_X, _Y)),
    Row("custom_vjp", _cv, lambda x, y: _sin_exp(np, x, y), (_X, _Y),
        no_forward=_CUSTOM_VJP_FORWARD),
    Row("shard_map", _shard_map, lambda x, y: (np.sin(x) * y, x * np.sum(y)), (_XS, _YS)),
]

# Cells left out of the table, each for a bug to fix (never skipped: absent).
# (row, check) -> why that cell does not apply.
LEFT_OUT = {
    # As JAX 0.10.2's (it has no DCE rule for while): a loop some output of which is used
    # keeps all its carries; tests/lowering/test_programs_as_jax.py checks it.
    **{(name, "dce_prunes"): "while loops are kept whole, as JAX's"
       for name in ("while_loop", "fori_loop_traced_bounds")},
}


def rows_for(check):
    """The rows, parametrized, less the cells LEFT_OUT of ``check``."""
    return pytest.mark.parametrize(
        "row", [r for r in ROWS if (r.name, check) not in LEFT_OUT], ids=str)


# --- the reference and its numerical derivatives (float64) ------------------------------
def _ref(row, x, y):
    return [np.asarray(o, np.float64)
            for o in row.ref(np.asarray(x, np.float64), np.asarray(y, np.float64))]


def _flat_ref(row):
    """The reference as a function of concat(x, y) to its flattened outputs."""
    n = len(row.args[0])
    return lambda z: np.concatenate([o.ravel() for o in _ref(row, z[:n], z[n:])])


def _jacobian(fun, z, eps=1e-6):
    cols = []
    for i in range(len(z)):
        dz = np.zeros_like(z)
        dz[i] = eps
        cols.append((fun(z + dz) - fun(z - dz)) / (2 * eps))
    return np.stack(cols, axis=1)


def _z(row):
    return np.concatenate([np.asarray(a, np.float64) for a in row.args])


def _split_out(row, flat):
    """A flat float64 vector back into the reference's output shapes."""
    outs, at = [], 0
    for o in _ref(row, *row.args):
        outs.append(flat[at:at + o.size].reshape(o.shape))
        at += o.size
    return outs


def _seeds(row, seed):
    """Fixed float32 vectors: one like each input (tangents), one like each output."""
    rng = np.random.default_rng(seed)
    ins = [rng.uniform(-1, 1, np.shape(a)).astype(np.float32) for a in row.args]
    outs = [rng.uniform(-1, 1, o.shape).astype(np.float32) for o in _ref(row, *row.args)]
    return ins, outs


def _close(actual, expected, rtol=RTOL, atol=ATOL):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(np.asarray(a), e, rtol=rtol, atol=atol)


# --- values --------------------------------------------------------------------------------
@rows_for("eager")
def test_eager_value(row):
    _close(row.fn(*row.args), _ref(row, *row.args))


@rows_for("jit")
def test_jit_value(row):
    _close(plax.jit(row.fn)(*row.args), _ref(row, *row.args))


@rows_for("vmap")
def test_vmap_over_the_first_argument(row):
    x, y = row.args
    flip_last = np.where(np.arange(len(x)) == len(x) - 1, -1, 1).astype(np.float32)
    xs = np.stack([x, -x, x * flip_last])  # other branches of cond and switch
    expected = [np.stack(o) for o in zip(*[_ref(row, xi, y) for xi in xs])]
    _close(plax.vmap(row.fn, in_axes=(0, None))(xs, y), expected)


# --- derivatives ---------------------------------------------------------------------------
@rows_for("jvp")
def test_jvp_against_central_differences(row):
    tangents, _ = _seeds(row, 0)
    if row.no_forward:
        with pytest.raises(row.no_forward[0], match=row.no_forward[1]):
            plax.jvp(row.fn, row.args, tuple(tangents))
        return
    out, t_out = plax.jvp(row.fn, row.args, tuple(tangents))
    _close(out, _ref(row, *row.args))
    t_ref = _jacobian(_flat_ref(row), _z(row)) @ np.concatenate(tangents)
    _close(t_out, _split_out(row, t_ref))


@rows_for("vjp")
def test_vjp_against_central_differences(row):
    _, cts = _seeds(row, 1)
    if row.no_reverse:
        with pytest.raises(row.no_reverse[0], match=row.no_reverse[1]):
            plax.vjp(row.fn, *row.args)[1](tuple(cts))
        return
    out, pullback = plax.vjp(row.fn, *row.args)
    _close(out, _ref(row, *row.args))
    ct_ref = _jacobian(_flat_ref(row), _z(row)).T @ np.concatenate([c.ravel() for c in cts])
    n = len(row.args[0])
    _close(pullback(tuple(cts)), [ct_ref[:n], ct_ref[n:]])


@rows_for("linearize")
def test_linearize_matches_jvp(row):
    tangents, _ = _seeds(row, 2)
    if row.no_forward:
        with pytest.raises(row.no_forward[0], match=row.no_forward[1]):
            plax.linearize(row.fn, *row.args)[1](*tangents)
        return
    out, f_lin = plax.linearize(row.fn, *row.args)
    _close(out, _ref(row, *row.args))
    _, t_jvp = plax.jvp(row.fn, row.args, tuple(tangents))
    _close(f_lin(*tangents), [np.asarray(t) for t in t_jvp])


def _hessian_vector_ref(row, w, v):
    """H v of s(z) = w . outputs(z), by central differences of a numerical gradient."""
    fun, z, eps = _flat_ref(row), _z(row), 1e-4
    grad = lambda z: _jacobian(fun, z, eps=1e-4).T @ w
    return (grad(z + eps * v) - grad(z - eps * v)) / (2 * eps)


@rows_for("grad_of_grad")
def test_grad_of_grad_against_central_differences(row):
    vs, ws = _seeds(row, 3)

    def scalar(x, y):
        return sum(jnp.sum(w * o) for w, o in zip(ws, row.fn(x, y)))

    def directional(x, y):
        gx, gy = plax.grad(scalar, argnums=(0, 1))(x, y)
        return jnp.sum(gx * vs[0]) + jnp.sum(gy * vs[1])

    if row.no_reverse:
        with pytest.raises(row.no_reverse[0], match=row.no_reverse[1]):
            plax.grad(directional, argnums=(0, 1))(*row.args)
        return
    hv = plax.grad(directional, argnums=(0, 1))(*row.args)
    w = np.concatenate([w.ravel() for w in ws]).astype(np.float64)
    hv_ref = _hessian_vector_ref(row, w, np.concatenate(vs).astype(np.float64))
    n = len(row.args[0])
    _close(hv, [hv_ref[:n], hv_ref[n:]], atol=1e-4)


# --- dead-code elimination -------------------------------------------------------------------
def _first_output_jaxpr(row):
    return plax.make_jaxpr(lambda x, y: row.fn(x, y)[0])(*row.args)


def _inner_equations(jaxpr) -> int:
    """How many equations the bodies held by ``jaxpr``'s equations have, at every depth."""
    count = 0
    for e in jaxpr.eqns:
        for sub in subjaxprs(e.params):
            body = open_jaxpr(sub)
            count += len(body.eqns) + _inner_equations(body)
    return count


@rows_for("dce_value")
def test_dce_of_the_unused_output_keeps_the_value(row):
    closed = _first_output_jaxpr(row)
    pruned, _ = dce_closed(closed, [True], instantiate=True)
    out, = eval_closed_jaxpr(pruned, *row.args)
    _close([out], _ref(row, *row.args)[:1])


@rows_for("dce_prunes")
def test_dce_of_the_unused_output_prunes_the_bodies(row):
    closed = _first_output_jaxpr(row)
    before = _inner_equations(closed.jaxpr)
    after = _inner_equations(dce_closed(closed, [True], instantiate=True)[0].jaxpr)
    assert after < before, (
        f"{row.name}: DCE of the unused output left the bodies at {after} equations "
        f"(from {before})\n{closed}")


@rows_for("dce_derivatives")
def test_dce_of_the_unused_output_keeps_the_derivatives(row):
    """The pruned program differentiates as the first output does (a custom rule pruned
    with its function still gives the derivative of what is left)."""
    pruned, _ = dce_closed(_first_output_jaxpr(row), [True], instantiate=True)
    first = lambda x, y: eval_closed_jaxpr(pruned, x, y)[0]
    size = _ref(row, *row.args)[0].size
    jac = _jacobian(lambda z: _flat_ref(row)(z)[:size], _z(row))
    tangents, cts = _seeds(row, 4)
    if not row.no_forward:
        _, t_out = plax.jvp(first, row.args, tuple(tangents))
        _close([t_out], [jac @ np.concatenate(tangents)])
    if not row.no_reverse:
        _, pullback = plax.vjp(first, *row.args)
        ct_ref = jac.T @ cts[0].ravel()
        n = len(row.args[0])
        _close(pullback(cts[0]), [ct_ref[:n], ct_ref[n:]])
