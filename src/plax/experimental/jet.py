"""plax.experimental.jet: Taylor-mode automatic differentiation, as ``jax.experimental.jet``.

``jet(fun, primals, series)`` pushes a truncated Taylor polynomial through ``fun``: each input
``x(t) = x0 + x1 t + x2 t**2/2! + ...`` (``series`` holds the derivatives x1, x2, ...) gives the
output's derivatives in one pass, however high the order. A ``JetTrace`` carries, per value,
its primal and its list of *normalized* Taylor coefficients (the k-th derivative over k!), and
each primitive maps them with its rule in ``jet_rules`` (the table lives in
``plax.core.rules``): ``rule(primals_in, series_in, **params) -> (primal_out, series_out)``.
Rules are written with the classic recurrences for Taylor arithmetic (products as Cauchy
convolutions, ``exp``/``log``/``sin``/... from their differential equations). A value whose
series is known to vanish carries ``zero_series`` and costs nothing.

Jitted functions stay one jit (of their Taylor-propagating body); custom_jvp/custom_vjp
functions are propagated through their primal function; loops and conditionals have no rule
(as in JAX).
"""
from __future__ import annotations

import functools
from functools import partial
from typing import Callable

import numpy as np

import plax.numpy as jnp
from plax import api_util, lax
from plax.core.caches import WeakKeyCache
from plax.core.jaxpr import ClosedJaxpr, consts_as_inputs, eval_jaxpr
from plax.core.rules import jet_rules
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import Trace, Tracer, current_trace, get_aval, set_current_trace
from plax.extend import linear_util as lu
from plax.extend.core import primitives as _extend_prims
from plax.first_order.sharding_constraint import reshard_p
from plax.tree_util import (register_pytree_node, tree_flatten, tree_structure, tree_unflatten,
                            treedef_is_leaf)

__all__ = ["jet", "jet2", "jet_rules", "JetTrace", "JetTracer", "ZeroTerm", "ZeroSeries",
           "zero_term", "zero_series", "fact", "jet_fun", "jet_subtrace", "traceable",
           "defzero", "zero_prop", "deflinear", "linear_prop", "def_deriv", "deriv_prop",
           "def_comp", "call_param_updaters", "weakref_lru_cache", "register_pytree_node",
           "tree_flatten", "tree_structure", "tree_unflatten", "treedef_is_leaf"]


# --- zero markers ---------------------------------------------------------------------------
class ZeroTerm:
    """One Taylor coefficient known to be zero."""

    def __repr__(self):
        return "zero_term"


class ZeroSeries:
    """A whole series known to be zero (the value does not move with t)."""

    def __repr__(self):
        return "zero_series"


zero_term = ZeroTerm()
zero_series = ZeroSeries()
register_pytree_node(ZeroTerm, lambda z: ((), None), lambda _, xs: zero_term)
register_pytree_node(ZeroSeries, lambda z: ((), None), lambda _, xs: zero_series)


def fact(n):
    """``n!`` as an array (``exp(lgamma(n + 1))``, as JAX computes it)."""
    return lax.exp(lax.lgamma(n + 1.))


def weakref_lru_cache(fn: Callable) -> Callable:
    """``fn(owner, *rest)`` cached per ``owner`` (held weakly: its entries go with it) and
    the hashable ``rest``."""
    cache = WeakKeyCache(f"weakref_lru_cache({getattr(fn, '__name__', 'fn')})")

    @functools.wraps(fn)
    def cached(owner, *rest):
        hit = cache.get(owner, rest)
        if hit is None:
            hit = cache.put(owner, rest, fn(owner, *rest))
        return hit

    cached.cache_clear = cache.clear
    return cached


# --- the trace ------------------------------------------------------------------------------
class _MissingJetRule(NotImplementedError, KeyError):
    """A primitive without a ``jet_rules`` entry (a KeyError too, as JAX's table lookup
    raises)."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class JetTracer(Tracer):
    """A value under ``jet``: its primal and its normalized Taylor coefficients (a list of
    ``order`` terms, or ``zero_series``)."""

    __slots__ = ("primal", "terms")

    def __init__(self, trace, primal, terms):
        if not (terms is zero_series or isinstance(terms, (list, tuple))):
            raise TypeError(f"JetTracer terms must be a list or zero_series, got {terms!r}.")
        self._trace = trace
        self.primal = primal
        self.terms = terms

    @property
    def aval(self):
        return get_aval(self.primal)

    def full_lower(self):
        """The primal itself when no term moves, else this tracer."""
        if self.terms is zero_series or all(t is zero_term for t in self.terms):
            return self.primal
        return self

    def __repr__(self):
        return f"JetTracer(primal={self.primal!r}, terms={self.terms!r})"


class JetTrace(Trace):
    """Propagates truncated Taylor series of ``order`` terms; rules run in the parent trace."""

    def __init__(self, tag, parent_trace, order: int):
        super().__init__(parent_trace, "jet")
        self.tag = tag
        self.order = order

    @property
    def main(self):
        return self.tag

    def to_primal_terms_pair(self, val):
        if isinstance(val, JetTracer) and val._trace is self:
            return val.primal, val.terms
        if isinstance(val, Tracer):
            self.check_foreign_tracer(val)
        return val, zero_series

    def process_primitive(self, prim, args, params):
        primals, series = zip(*map(self.to_primal_terms_pair, args)) if args else ((), ())
        with set_current_trace(self.parent):
            if all(s is zero_series for s in series):
                out = prim.bind(*primals, **params)
                if prim.multiple_results:
                    return [JetTracer(self, o, zero_series) for o in out]
                return JetTracer(self, out, zero_series)
            rule = jet_rules.get(prim)
            if rule is None:
                raise _MissingJetRule(
                    f"Taylor-mode (jet) rule for '{prim.name}' not implemented: jet_rules has "
                    "no entry for it.")
            series = [_instantiate_series(p, s, self.order) for p, s in zip(primals, series)]
            out, out_series = rule(list(primals), series, **params)
        if prim.multiple_results:
            if out_series is zero_series:
                out_series = [zero_series] * len(out)
            return [JetTracer(self, o, s) for o, s in zip(out, out_series)]
        return JetTracer(self, out, out_series)


def _zeros_like_primal(x):
    aval = get_aval(x)
    return jnp.zeros(aval.shape, aval.dtype)


def _instantiate_series(primal, terms, order):
    if terms is zero_series:
        terms = [zero_term] * order
    return [_zeros_like_primal(primal) if t is zero_term else t for t in terms]


# --- entry points ---------------------------------------------------------------------------
@lu.transformation2
def jet_subtrace(f, tag, order, primals, series):
    """Run ``f`` on jet tracers of ``primals`` with ``series`` under a new JetTrace; returns
    the outputs' primals and series (``zero_series`` where nothing moved)."""
    trace = JetTrace(tag, current_trace(), order)
    ins = [JetTracer(trace, p, list(s)) for p, s in zip(primals, series, strict=True)]
    try:
        with set_current_trace(trace):
            outs = f(*ins)
        pairs = [trace.to_primal_terms_pair(o) for o in outs]
    finally:
        trace.finish()
    return [p for p, _ in pairs], [s for _, s in pairs]


@lu.transformation2
def jet_fun(f, order, primals, series):
    """Call ``f(tag, order, primals, series)`` with a fresh tag and write zero series out as
    ``order`` zero arrays."""
    out_primals, out_series = f(object(), order, primals, series)
    return out_primals, [[jnp.zeros_like(p)] * order if s is zero_series else list(s)
                         for p, s in zip(out_primals, out_series)]


@lu.transformation_with_aux2
def traceable(f, store, in_tree_def, *primals_and_series):
    """``f(primals, series)`` as a function of the leaves of ``(primals, series)`` (structure
    ``in_tree_def``) returning flat leaves; the output structure goes to the store."""
    primals, series = tree_unflatten(in_tree_def, primals_and_series)
    out = f(primals, series)
    leaves, tree = tree_flatten(out)
    store.store(tree)
    return leaves


@lu.transformation_with_aux2
def _flatten_output(f, store, *args):
    leaves, tree = tree_flatten(f(*args))
    store.store(tree)
    return leaves


def jet(fun, primals, series, factorial_scaled=True, **_):
    """Taylor-mode derivatives of ``fun`` at ``primals``.

    ``primals`` is a tuple of arrays, one per positional argument; ``series`` a tuple of
    lists, one per argument, all of the same length K: the input's derivatives of orders
    1..K with respect to t (``factorial_scaled=False``: its Taylor coefficients, the k-th
    derivative over k!). Returns ``(primals_out, series_out)``: ``fun(*primals)`` and, per
    output leaf, the list of the K derivatives (or coefficients) of ``fun(x(t))`` at t = 0.
    """
    try:
        order, = set(map(len, series))
    except ValueError:
        raise ValueError("jet terms have inconsistent lengths for different arguments") from None
    if len(primals) != len(series):
        raise ValueError(f"jet: got {len(primals)} primals but series for {len(series)} "
                         "arguments; give one list of terms per primal.")
    for i, (x, terms) in enumerate(zip(primals, series)):
        if not treedef_is_leaf(tree_structure(x)):
            raise ValueError(f"primal value at position {i} is not an array")
        for j, t in enumerate(terms):
            if not treedef_is_leaf(tree_structure(t)):
                raise ValueError(f"term {j} for argument {i} is not an array")
    f, out_tree = _flatten_output(
        lu.wrap_init(fun, debug_info=api_util.debug_info("jet", fun, primals, {})))
    if factorial_scaled:
        series = [[term / fact(k + 1) for k, term in enumerate(terms)] for terms in series]
    out_primals, out_series = jet_fun(jet_subtrace(f), order).call_wrapped(primals, series)
    if factorial_scaled:
        out_series = [[term * fact(k + 1) for k, term in enumerate(terms)]
                      for terms in out_series]
    return tree_unflatten(out_tree(), out_primals), tree_unflatten(out_tree(), out_series)


jet2 = partial(jet, factorial_scaled=False)


# --- rule makers ----------------------------------------------------------------------------
def zero_prop(prim, primals_in, series_in, **params):
    """A primitive whose output does not move (comparisons, rounding, integer results)."""
    return prim.bind(*primals_in, **params), zero_series


def defzero(prim):
    jet_rules[prim] = partial(zero_prop, prim)


def linear_prop(prim, primals_in, series_in, **params):
    """A primitive linear in its operands: applied to each order's terms alike."""
    primal_out = prim.bind(*primals_in, **params)
    series_out = [prim.bind(*terms, **params) for terms in zip(*series_in)]
    if prim.multiple_results:
        series_out = [list(per_output) for per_output in zip(*series_out)]
    return primal_out, series_out


def deflinear(prim):
    jet_rules[prim] = partial(linear_prop, prim)


def _chain(f_prime_series, u):
    """The coefficients of f(u(t)) past the first, given those of f'(u(t)) and of u:
    k v_k = sum_{j=1..k} j u_j f'_{k-j} (from v' = f'(u) u')."""
    v = []
    for k in range(1, len(u)):
        v.append(sum(j * f_prime_series[k - j] * u[j] for j in range(1, k + 1)) / k)
    return v


def deriv_prop(prim, deriv, primals_in, series_in):
    """A unary primitive whose derivative ``deriv`` is itself jet-traceable."""
    x, = primals_in
    terms, = series_in
    c0, cs = jet2(deriv, primals_in, series_in)
    return prim.bind(x), _chain([c0, *cs], [x, *terms])


def def_deriv(prim, deriv):
    """Propagate through ``prim`` by its first derivative ``deriv``."""
    jet_rules[prim] = partial(deriv_prop, prim, deriv)


def def_comp(prim, comp, **kwargs):
    """Propagate through ``prim`` as through the composition ``comp`` of ruled primitives."""
    jet_rules[prim] = partial(jet2, comp, **kwargs)


# --- elementwise rules ----------------------------------------------------------------------
def _exp_rule(primals_in, series_in, **_):
    x, = primals_in
    u = [x, *series_in[0]]
    v = [lax.exp(x)]
    for k in range(1, len(u)):  # v' = v u'
        v.append(sum(j * u[j] * v[k - j] for j in range(1, k + 1)) / k)
    return v[0], v[1:]


def _log_rule(primals_in, series_in, **_):
    x, = primals_in
    u = [x, *series_in[0]]
    v = [lax.log(x)]
    for k in range(1, len(u)):  # u v' = u'
        rest = sum(j * v[j] * u[k - j] for j in range(1, k))
        v.append((u[k] - rest / k) / u[0])
    return v[0], v[1:]


def _div_rule(primals_in, series_in, **_):
    x, y = primals_in
    u, w = [x, *series_in[0]], [y, *series_in[1]]
    q = []
    for k in range(len(u)):  # u = q w
        q.append((u[k] - sum(q[j] * w[k - j] for j in range(k))) / w[0])
    return q[0], q[1:]


def _bilinear_rule(prim, primals_in, series_in, **params):
    x, y = primals_in
    u, w = [x, *series_in[0]], [y, *series_in[1]]
    v = [sum(prim.bind(u[j], w[k - j], **params) for j in range(k + 1)) for k in range(len(u))]
    return v[0], v[1:]


def _pow_rule(primals_in, series_in, **_):
    x, y = primals_in
    log_part, log_terms = jet2(lambda a, b: lax.mul(b, lax.log(a)), primals_in, series_in)
    u = [log_part, *log_terms]
    v = [lax.pow(x, y)]
    for k in range(1, len(u)):  # x**y = exp(y log x)
        v.append(sum(j * u[j] * v[k - j] for j in range(1, k + 1)) / k)
    return v[0], v[1:]


def _power_by_squaring(x, n: int):
    if n < 0:
        return _power_by_squaring(1 / x, -n)
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else result * base
        n >>= 1
        if n:
            base = base * base
    return result


def _integer_pow_rule(primals_in, series_in, *, y):
    if y == 0:
        return jet2(jnp.ones_like, primals_in, series_in)
    return jet2(lambda x: _power_by_squaring(x, y), primals_in, series_in)


def _logistic_series(u):
    """Coefficients of sigmoid(u(t)) from sigmoid' = s (1 - s)."""
    s = [lax.logistic(u[0])]
    slope = [s[0] * (1 - s[0])]
    for k in range(1, len(u)):
        s.append(sum(j * slope[k - j] * u[j] for j in range(1, k + 1)) / k)
        # coefficient k of s - s**2
        slope.append(s[k] - sum(s[j] * s[k - j] for j in range(k + 1)))
    return s


def _logistic_rule(primals_in, series_in, **_):
    s = _logistic_series([primals_in[0], *series_in[0]])
    return s[0], s[1:]


def _tanh_rule(primals_in, series_in, **_):
    # tanh(x) = 2 sigmoid(2x) - 1
    s = _logistic_series([2 * primals_in[0], *(2 * t for t in series_in[0])])
    return 2 * s[0] - 1, [2 * t for t in s[1:]]


def _sin_cos_series(u, sin, cos, sign):
    """Coefficients of (sin(u), cos(u)) (sign -1) or (sinh(u), cosh(u)) (sign +1)."""
    s, c = [sin(u[0])], [cos(u[0])]
    for k in range(1, len(u)):
        s.append(sum(j * u[j] * c[k - j] for j in range(1, k + 1)) / k)
        c.append(sign * sum(j * u[j] * s[k - j] for j in range(1, k + 1)) / k)
    return s, c


def _trig_rule(which, sin, cos, sign, primals_in, series_in, **_):
    pair = _sin_cos_series([primals_in[0], *series_in[0]], sin, cos, sign)
    out = pair[which]
    return out[0], out[1:]


def _erf_inv_rule(primals_in, series_in, **_):
    # y = erf_inv(x): y' = (sqrt(pi)/2) exp(y**2) x', with the coefficients of exp(y**2)
    # built alongside those of y
    x, = primals_in
    u = [x, *series_in[0]]
    half_sqrt_pi = np.sqrt(np.pi) / 2.
    y = [lax.erf_inv(x)]
    sq = [lax.square(y[0])]
    ex = [lax.exp(sq[0])]
    for k in range(1, len(u)):
        y.append(sum(j * half_sqrt_pi * ex[k - j] * u[j] for j in range(1, k + 1)) / k)
        if k + 1 < len(u):
            sq.append(sum(y[j] * y[k - j] for j in range(k + 1)))
            ex.append(sum(j * sq[j] * ex[k - j] for j in range(1, k + 1)) / k)
    return y[0], y[1:]


def _atan2_rule(primals_in, series_in, **_):
    x, y = primals_in
    q0, qs = jet2(lax.div, primals_in, series_in)
    one = jnp.ones_like(q0)
    c0, cs = jet2(lambda q: lax.div(one, 1 + lax.square(q)), (q0,), (qs,))
    return lax.atan2(x, y), _chain([c0, *cs], [q0, *qs])


def _abs_rule(primals_in, series_in, **params):
    x, = primals_in
    sign = lax.select(lax.lt(x, jnp.zeros_like(x)), jnp.full_like(x, -1), jnp.ones_like(x))
    return lax.abs_p.bind(x, **params), [sign * t for t in series_in[0]]


def _select_n_rule(primals_in, series_in, **params):
    which, *cases = primals_in
    return (lax.select_n(which, *cases),
            [lax.select_n(which, *terms) for terms in zip(*series_in[1:])])


def _extremum_rule(first_wins, primals_in, series_in, **_):
    """max/min: the winner's terms; where the two tie, their average."""
    x, y = jnp.broadcast_arrays(*primals_in)
    wins, ties = first_wins(x, y), x == y
    def pick(a, b):
        a, b = jnp.broadcast_arrays(a, b)
        return lax.select(ties, (a + b) / 2, lax.select(wins, a, b))
    return lax.select(wins, x, y), [pick(a, b) for a, b in zip(*series_in)]


def _reduce_choice_rule(prim, primals_in, series_in, *, axes, **params):
    """reduce_max/min: the chosen elements' terms (averaged over ties)."""
    x, = primals_in
    out = prim.bind(x, axes=axes, **params)
    kept_shape = [1 if i in axes else d for i, d in enumerate(np.shape(x))]
    terms = series_in[0]
    chosen = lax.convert_element_type(lax.eq(x, lax.reshape(out, kept_shape)),
                                      get_aval(terms[0]).dtype)
    counts = lax.reduce_sum(chosen, axes)
    return out, [lax.div(lax.reduce_sum(lax.mul(t, chosen), axes), counts) for t in terms]


def _cumulative_rule(combine, primals_in, series_in, *, axis: int, reverse: bool, **_):
    # as a parallel prefix scan of ruled primitives (the windowed form has no Taylor rule)
    return jet2(partial(lax.associative_scan, combine, axis=axis, reverse=reverse),
                primals_in, series_in)


def _dynamic_slice_rule(primals_in, series_in, **params):
    operand, *starts = primals_in
    return (lax.dynamic_slice_p.bind(operand, *starts, **params),
            [lax.dynamic_slice_p.bind(t, *starts, **params) for t in series_in[0]])


def _dynamic_update_slice_rule(primals_in, series_in, **params):
    operand, update, *starts = primals_in
    return (lax.dynamic_update_slice_p.bind(operand, update, *starts, **params),
            [lax.dynamic_update_slice_p.bind(a, b, *starts, **params)
             for a, b in zip(series_in[0], series_in[1])])


def _gather_rule(primals_in, series_in, **params):
    operand, indices = primals_in
    return (lax.gather_p.bind(operand, indices, **params),
            [lax.gather_p.bind(t, indices, **params) for t in series_in[0]])


def _scatter_add_rule(primals_in, series_in, **params):
    operand, indices, updates = primals_in
    return (lax.scatter_add_p.bind(operand, indices, updates, **params),
            [lax.scatter_add_p.bind(a, indices, b, **params)
             for a, b in zip(series_in[0], series_in[2])])


# --- calls: jit bodies, plain calls, custom derivatives ---------------------------------------
# prim -> updater(params, num_operands) -> params, for a call primitive re-bound on its
# Taylor-propagating body (which takes the series as further operands).
call_param_updaters: dict = {}


@weakref_lru_cache
def _jet_body(closed: ClosedJaxpr, order: int, in_avals: tuple):
    """``closed`` propagating ``order`` Taylor terms: a jaxpr from (primals, each input's
    terms) to (primal outputs, each output's terms)."""
    n = len(closed.in_avals)

    def body(*flat):
        primals, rest = flat[:n], flat[n:]
        series = [list(rest[i * order:(i + 1) * order]) for i in range(n)]
        outs, out_series = jet2(lambda *xs: eval_jaxpr(closed.jaxpr, closed.consts, *xs),
                                primals, series)
        return [*outs, *(t for terms in out_series for t in terms)]

    jaxpr, consts = trace_to_jaxpr(body, list(in_avals), description="jet")
    return consts_as_inputs(ClosedJaxpr(jaxpr, consts))


def _call_rule(prim, body_param, primals_in, series_in, **params):
    """A call primitive bound again on its body's Taylor propagation."""
    closed = params[body_param]
    order = len(series_in[0])
    flat = [*primals_in, *(t for terms in series_in for t in terms)]
    callee, consts = _jet_body(closed, order, tuple(get_aval(x) for x in flat))
    new_params = dict(params, **{body_param: callee})
    update = call_param_updaters.get(prim)
    if update is not None:
        new_params = update(new_params, len(consts) + len(flat))
    outs = prim.bind(*consts, *flat, **new_params)
    m = len(closed.out_avals)
    return outs[:m], [list(outs[m + i * order:m + (i + 1) * order]) for i in range(m)]


def _by_primal_function(primals_in, series_in, *, call_jaxpr, **_):
    """custom_jvp/custom_vjp: propagate through the function (its consts lead the operands)."""
    return jet2(lambda *xs: eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *xs),
                primals_in, series_in)


def _jit_params(params, num_operands):
    # the new operands are the body's own: unconstrained, not donated
    return dict(params, donated_invars=(False,) * num_operands, in_shardings=(),
                out_shardings=())


# --- the table ------------------------------------------------------------------------------
for _name in ("le", "lt", "gt", "ge", "eq", "ne", "not", "and", "or", "xor", "floor", "ceil",
              "round", "sign", "stop_gradient", "is_finite", "shift_left",
              "shift_right_arithmetic", "shift_right_logical", "bitcast_convert_type",
              "argmax", "argmin", "population_count", "clz"):
    defzero(getattr(lax, f"{_name}_p"))

for _name in ("neg", "real", "complex", "conj", "imag", "add", "sub", "convert_element_type",
              "broadcast_in_dim", "concatenate", "split", "stack", "unstack", "pad", "reshape",
              "squeeze", "rev", "transpose", "slice", "reduce_sum", "reduce_window_sum", "fft",
              "copy", "cumsum", "sharding_constraint"):
    deflinear(getattr(lax, f"{_name}_p"))
deflinear(_extend_prims.add_jaxvals_p)
deflinear(reshard_p)

jet_rules[lax.dynamic_slice_p] = _dynamic_slice_rule
jet_rules[lax.dynamic_update_slice_p] = _dynamic_update_slice_rule
jet_rules[lax.gather_p] = _gather_rule
jet_rules[lax.scatter_add_p] = _scatter_add_rule
jet_rules[lax.cumprod_p] = partial(_cumulative_rule, lax.mul)
jet_rules[lax.cummax_p] = partial(_cumulative_rule, lax.max)
jet_rules[lax.cummin_p] = partial(_cumulative_rule, lax.min)

def_deriv(lax.erf_p, lambda x: lax.mul(jnp.full_like(x, 2. / np.sqrt(np.pi)),
                                      lax.exp(lax.neg(lax.square(x)))))
def_deriv(lax.atan_p, lambda x: 1 / (1 + lax.square(x)))
def_deriv(lax.asin_p, lambda x: lax.rsqrt(1 - lax.square(x)))
def_deriv(lax.acos_p, lambda x: -lax.rsqrt(1 - lax.square(x)))
def_comp(lax.expm1_p, lambda x: lax.exp(x) - 1)
def_comp(lax.log1p_p, lambda x: lax.log(1 + x))
def_comp(lax.sqrt_p, lambda x: x ** 0.5)
def_comp(lax.square_p, lambda x: x * x)
def_comp(lax.rsqrt_p, lambda x: x ** -0.5)
def_comp(lax.asinh_p, lambda x: lax.log(x + lax.sqrt(lax.square(x) + 1)))
def_comp(lax.acosh_p, lambda x: lax.log(x + lax.sqrt(lax.square(x) - 1)))
def_comp(lax.atanh_p, lambda x: 0.5 * lax.log(lax.div(1 + x, 1 - x)))
def_comp(lax.erfc_p, lambda x: 1 - lax.erf(x))
def_comp(lax.rem_p, lambda x, y: x - y * lax.floor(x / y))
def_comp(lax.clamp_p, lambda lo, x, hi: lax.min(lax.max(lo, x), hi))
def_comp(lax.tan_p, lambda x: lax.div(lax.sin(x), lax.cos(x)))
def_comp(lax.exp2_p, lambda x: lax.exp(x * np.log(2.).astype(get_aval(x).dtype)))

jet_rules[lax.erf_inv_p] = _erf_inv_rule
jet_rules[lax.exp_p] = _exp_rule
jet_rules[lax.log_p] = _log_rule
jet_rules[lax.pow_p] = _pow_rule
jet_rules[lax.integer_pow_p] = _integer_pow_rule
jet_rules[lax.logistic_p] = _logistic_rule
jet_rules[lax.tanh_p] = _tanh_rule
jet_rules[lax.atan2_p] = _atan2_rule
jet_rules[lax.div_p] = _div_rule
jet_rules[lax.sin_p] = partial(_trig_rule, 0, lax.sin, lax.cos, -1)
jet_rules[lax.cos_p] = partial(_trig_rule, 1, lax.sin, lax.cos, -1)
jet_rules[lax.sinh_p] = partial(_trig_rule, 0, lax.sinh, lax.cosh, 1)
jet_rules[lax.cosh_p] = partial(_trig_rule, 1, lax.sinh, lax.cosh, 1)
jet_rules[lax.mul_p] = partial(_bilinear_rule, lax.mul_p)
jet_rules[lax.dot_general_p] = partial(_bilinear_rule, lax.dot_general_p)
jet_rules[lax.conv_general_dilated_p] = partial(_bilinear_rule, lax.conv_general_dilated_p)
jet_rules[lax.reduce_max_p] = partial(_reduce_choice_rule, lax.reduce_max_p)
jet_rules[lax.reduce_min_p] = partial(_reduce_choice_rule, lax.reduce_min_p)
jet_rules[lax.abs_p] = _abs_rule
jet_rules[lax.select_n_p] = _select_n_rule
jet_rules[lax.max_p] = partial(_extremum_rule, lambda x, y: x > y)
jet_rules[lax.min_p] = partial(_extremum_rule, lambda x, y: x < y)

jet_rules[_extend_prims.jit_p] = partial(_call_rule, _extend_prims.jit_p, "jaxpr")
call_param_updaters[_extend_prims.jit_p] = _jit_params
jet_rules[_extend_prims.closed_call_p] = partial(_call_rule, _extend_prims.closed_call_p,
                                                 "call_jaxpr")
jet_rules[_extend_prims.remat_p] = partial(_call_rule, _extend_prims.remat_p, "jaxpr")
jet_rules[_extend_prims.custom_jvp_call_p] = _by_primal_function
jet_rules[_extend_prims.custom_vjp_call_p] = _by_primal_function

