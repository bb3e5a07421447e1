"""plax.scipy.stats continuous distributions against scipy.stats (values, edges, far tails,
broadcasting, f32 and f64) and JAX 0.10 where its conventions differ from SciPy's; jit, vmap
and check_grads of the log-densities."""
import numpy as np
import pytest
import scipy.stats as ss

import plax
from plax.scipy import stats as S
from plax.test_util import check_grads
from helpers import check_table, close

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
INF, NAN = np.inf, np.nan

# Every case is evaluated on arguments broadcast to (2, 12) before the call, so that the
# compiled element-wise programs are shared between cases (and with the discrete tests);
# broadcasting inside the functions is tested separately.
SHAPE = (2, 12)
X = np.array([[-INF, -2.5, -1, -0.25, 0, 0.3, 0.5, 1, 1.7, 4, INF, NAN]])
XT = np.array([[-40, -30, -20.5, -19.5, -10.5, -9.5, -8.5, 1e-10, 8.5, 12, 25, 40]])  # tails
Q = np.array([[-0.5, 0, 1e-30, 1e-7, 0.01, 0.2, 0.5, 0.99, 1 - 1e-6, 1, 1.5, NAN]])
LOC, SCALE = np.array([[0.0], [0.5]]), np.array([[1.0], [2.5]])
# truncation intervals far out in both tails, and points across them
TA, TB = np.array([[-40.0], [5.0]]), np.array([[-39.0], [5.25]])
TX = TA + np.linspace(-0.1, 1.1, 12) * (TB - TA)


def col(*v):
    return np.array(v, float)[:, None]


def nan_at_ends(ref):
    """``ref`` with NaN at q = 0 and q = 1 (JAX's gumbel quantiles; SciPy gives -inf, inf)."""
    def fixed(q, *args):
        return np.where((q == 0) | (q == 1), NAN, ref(q, *args))
    return fixed


def _family(mod, ref, fns, args):
    return [(getattr(mod, f), getattr(ref, f), args) for f in fns]


ALL6 = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
BETA = (col(0.5, 2.5), col(1.5, 0.8), col(0, -1), col(1, 3))
# (plax function, reference, arguments)
CONTINUOUS = [
    *_family(S.norm, ss.norm, ALL6 + ("ppf", "isf"), (X, LOC, SCALE)),
    *_family(S.norm, ss.norm, ("ppf", "isf"), (Q, LOC, SCALE)),
    *_family(S.norm, ss.norm, ("logcdf", "logsf"), (XT, LOC, SCALE)),
    *_family(S.cauchy, ss.cauchy, ALL6, (X, LOC, SCALE)),
    *_family(S.cauchy, ss.cauchy, ("ppf", "isf"), (Q, LOC, SCALE)),
    *_family(S.expon, ss.expon, ALL6, (X, LOC, SCALE)),
    *_family(S.expon, ss.expon, ("logcdf", "ppf"), (XT, LOC, SCALE)),
    *_family(S.laplace, ss.laplace, ("logpdf", "pdf", "cdf"), (X, LOC, SCALE)),
    *_family(S.logistic, ss.logistic, ("logpdf", "pdf", "cdf", "sf"), (X, LOC, SCALE)),
    *_family(S.logistic, ss.logistic, ("ppf", "isf"), (Q, LOC, SCALE)),
    *_family(S.uniform, ss.uniform, ("logpdf", "pdf", "cdf"), (X, LOC, SCALE)),
    (S.uniform.ppf, ss.uniform.ppf, (Q, LOC, SCALE)),
    *_family(S.gumbel_r, ss.gumbel_r, ALL6, (X, LOC, SCALE)),
    *_family(S.gumbel_r, ss.gumbel_r, ("logsf", "logcdf"), (XT, LOC, SCALE)),
    *_family(S.gumbel_l, ss.gumbel_l, ALL6, (X, LOC, SCALE)),
    (S.gumbel_r.ppf, nan_at_ends(ss.gumbel_r.ppf), (Q, LOC, SCALE)),
    (S.gumbel_l.ppf, nan_at_ends(ss.gumbel_l.ppf), (Q, LOC, SCALE)),
    *_family(S.beta, ss.beta, ALL6, (X, *BETA)),
    *_family(S.gamma, ss.gamma, ALL6, (X, col(0.5, 3), col(0, -1), col(1, 2))),
    *_family(S.chi2, ss.chi2, ALL6, (X, col(1, 5), col(0, -1), col(1, 0.5))),
    *_family(S.pareto, ss.pareto, ALL6, (X, col(0.5, 3), col(0, -1), col(1, 0.5))),
    (S.pareto.ppf, ss.pareto.ppf, (Q, col(0.5, 3), col(0, -1), col(1, 0.5))),
    *_family(S.truncnorm, ss.truncnorm, ALL6, (X, col(-1, 0.25), col(2, INF), LOC, SCALE)),
    *_family(S.truncnorm, ss.truncnorm, ("logpdf", "logcdf", "logsf"), (TX, TA, TB)),
    *_family(S.t, ss.t, ("logpdf", "pdf"), (X, col(1.5, 30), LOC, SCALE)),
    *_family(S.gennorm, ss.gennorm, ("logpdf", "pdf", "cdf"), (X, col(0.7, 2.5))),
    *_family(S.vonmises, ss.vonmises, ("logpdf", "pdf"), (X, col(0.5, 40))),
    *_family(S.wrapcauchy, ss.wrapcauchy, ("logpdf", "pdf"), (X, col(0.3, 0.9))),
]


def test_continuous_f32():
    check_table(CONTINUOUS, F32, SHAPE, rtol=5e-5, atol=1e-6)


def test_continuous_f64():
    with plax.enable_x64():
        check_table(CONTINUOUS, F64, SHAPE, rtol=1e-11, atol=1e-13)


# The functions each module of jax.scipy.stats 0.10 has (gaussian_kde is not part of
# plax.scipy.stats).
JAX_MODULES = {
    "bernoulli": "cdf logpmf pmf ppf", "beta": "cdf logcdf logpdf logsf pdf sf",
    "betabinom": "logpmf pmf", "binom": "logpmf pmf",
    "cauchy": "cdf isf logcdf logpdf logsf pdf ppf sf", "chi2": "cdf logcdf logpdf logsf pdf sf",
    "dirichlet": "logpdf pdf", "expon": "cdf logcdf logpdf logsf pdf ppf sf",
    "gamma": "cdf logcdf logpdf logsf pdf sf", "gennorm": "cdf logpdf pdf", "geom": "logpmf pmf",
    "gumbel_l": "cdf logcdf logpdf logsf pdf ppf sf",
    "gumbel_r": "cdf logcdf logpdf logsf pdf ppf sf", "laplace": "cdf logpdf pdf",
    "logistic": "cdf isf logpdf pdf ppf sf", "multinomial": "logpmf pmf", "nbinom": "logpmf pmf",
    "multivariate_normal": "logpdf pdf",
    "norm": "cdf isf logcdf logpdf logsf pdf ppf sf",
    "pareto": "cdf logcdf logpdf logsf pdf ppf sf", "poisson": "cdf entropy logpmf pmf",
    "t": "logpdf pdf", "truncnorm": "cdf logcdf logpdf logsf pdf sf",
    "uniform": "cdf logpdf pdf ppf", "vonmises": "logpdf pdf", "wrapcauchy": "logpdf pdf",
}


def test_modules_match_jax():
    import importlib
    for name, fns in JAX_MODULES.items():
        mod = importlib.import_module(f"plax.scipy.stats.{name}")
        assert getattr(S, name) is mod
        assert sorted(mod.__all__) == fns.split(), name
        assert all(callable(getattr(mod, f)) for f in mod.__all__)
    assert all(callable(getattr(S, f)) for f in ("mode", "rankdata", "sem"))
    assert plax.scipy.stats is S


def test_broadcasting_promotion_and_weak_types():
    # operands of shapes (12,), (2, 1) and () (every function broadcasts through the same
    # promotion); results (2, 12), as in the tables
    x, loc = X[0].astype(np.float32), LOC.astype(np.float32)
    close(S.norm.logpdf(x, loc, 2.0), ss.norm.logpdf(x, loc, 2.0), F32, 1e-5, 1e-6)
    # integers promote to the default float; Python scalars alone give a weak result
    ints = np.zeros(SHAPE, np.int32)
    for out in (S.norm.logpdf(ints, ints, 1), S.expon.sf(ints.astype(np.int8))):
        assert out.dtype == F32 and not out.aval.weak_type
    assert S.norm.logpdf(1, 0.5).aval.weak_type
    assert S.logistic.cdf(np.float16(1)).dtype == np.float16
    with pytest.raises(TypeError, match="norm.cdf requires ndarray or scalar arguments"):
        S.norm.cdf([0.5, 1.0])
    with pytest.raises(TypeError, match=r"got incompatible shapes for broadcasting: \(3,\)"):
        S.norm.logpdf(np.zeros(3), 0.0, np.ones(4))


def full(v):
    """``v`` broadcast to SHAPE as float32 (so the tables' compiled programs are reused)."""
    return np.asarray(np.broadcast_to(v, SHAPE), np.float32)


def test_jax_conventions_off_scipy():
    """Parameter values SciPy rejects (or maps to NaN) give JAX 0.10's results."""
    x, loc, scale, three = full(X), full(LOC), full(SCALE), full(3.0)
    # a negative scale mirrors norm and t (their log-densities use log|scale|)
    close(S.norm.logpdf(x, loc, -scale), ss.norm.logpdf(x, loc, scale), F32, 1e-5, 1e-6)
    close(S.t.logpdf(x, three, loc, -scale), ss.t.logpdf(x, 3, loc, scale), F32, 1e-5, 1e-6)
    below = np.broadcast_to(X < 0, SHAPE)
    # with a negative scale, expon is -inf below loc and NaN above; gamma's sf is 1 below 0
    # whatever its shape parameter
    got = np.asarray(S.expon.logpdf(x, full(0.0), -scale))
    assert np.all(got[below] == -INF) and np.all(np.isnan(got[~below]))
    bad, two = full(col(0.0, -1.0)), full(2.0)
    assert np.all(np.asarray(S.gamma.sf(x, bad, loc, scale))[below & (loc == 0)] == 1)
    # NaN for: beta with a, b or scale <= 0; gumbel scale <= 0; truncnorm a >= b;
    # von Mises kappa <= 0; wrapped Cauchy c outside (0, 1)
    for out in (S.beta.logpdf(x, bad, two, loc, scale), S.beta.logpdf(x, two, bad, loc, scale),
                S.beta.logpdf(x, two, two, loc, bad), S.gumbel_r.logpdf(x, loc, bad),
                S.gumbel_l.cdf(x, loc, bad),
                S.truncnorm.logpdf(x, full(1.0), full(col(0.5, 1.0)), loc, scale),
                S.vonmises.logpdf(x, bad), S.wrapcauchy.logpdf(x, full(col(1.0, 1.5)))):
        assert np.all(np.isnan(np.asarray(out))), out
    # pareto with b = 0: the quantiles above q = 0 are inf
    q = np.asarray(S.pareto.ppf(full(Q), full(0.0), loc, scale))[0]
    np.testing.assert_array_equal(q, [NAN, 1, 1] + [INF] * 7 + [NAN, NAN])  # (1 - 1e-30 == 1)


def test_dirichlet():
    alpha = np.float32([1.5, 2.0, 3.0])
    # two points (with exact sums), one with a zero part, one whose parts sum to 1.6
    x = np.float32([[0.25, 0.125, 0.0, 0.5], [0.25, 0.375, 0.5, 0.6], [0.5, 0.5, 0.5, 0.5]])
    want = [ss.dirichlet.logpdf(c, alpha) for c in x[:, :2].T] + [-INF, -INF]
    close(S.dirichlet.logpdf(x, alpha), want, F32, 2e-5, 1e-6)
    close(S.dirichlet.logpdf(x, np.float32([0.0, 2, 3])), [-INF] * 4, F32)  # alpha <= 0
    # K - 1 entries: the last is 1 minus their sum (here a negative one for the last point)
    close(S.dirichlet.pdf(x[:2], alpha), np.exp(want[:3] + [-INF]), F32, 2e-5)
    with pytest.raises(ValueError, match="`alpha` must be one-dimensional"):
        S.dirichlet.logpdf(x, alpha[None])
    with pytest.raises(ValueError, match="same number of entries as `alpha` or one entry fewer"):
        S.dirichlet.logpdf(x[:1], alpha)
    with pytest.raises(ValueError, match="one entry fewer"):
        S.dirichlet.logpdf(np.float32(0.5), alpha)


def test_jit_and_vmap():
    x, a, scale = full(X), full(col(0.7, 2.5)), full(np.linspace(1, 2, 12))
    lp, c = plax.jit(lambda x, a: (S.t.logpdf(x, a), S.laplace.cdf(x, a, a)))(x, a)
    close(lp, ss.t.logpdf(x, a), F32, 2e-5, 1e-6)
    close(c, ss.laplace.cdf(x, a, a), F32, 2e-5, 1e-6)
    # batched along the rows and along the columns (every operand mapped, as SHAPE-d arrays)
    close(plax.vmap(S.beta.cdf)(x, a, a), ss.beta.cdf(x, a, a), F32, 5e-5, 1e-6)
    v = plax.vmap(S.gamma.logpdf, in_axes=1, out_axes=1)(x, a, full(0.0), scale)
    with np.errstate(invalid="ignore"):
        close(v, ss.gamma.logpdf(x, a, 0, scale), F32, 2e-5, 1e-6)


# Derivatives at points inside the supports, on SHAPE-d arrays (reusing the compiled
# programs of the f64 table).
XG = np.linspace(0.05, 0.95, 24).reshape(SHAPE)
GRAD_CASES = [
    (S.norm.logpdf, (XG, 0.5, 1.7)), (S.t.logpdf, (XG, 3.5, 0.5, 1.7)),
    (S.beta.logpdf, (XG, 2.5, 1.5, -0.1, 1.2)), (S.gamma.logpdf, (XG + 1, 2.5, 0.1, 1.5)),
    (S.logistic.logpdf, (XG, 0.5, 1.7)), (S.laplace.logpdf, (XG, 0.5, 1.7)),
    (S.truncnorm.logpdf, (XG, -1.0, 2.0, 0.1, 1.2)), (S.gamma.cdf, (XG + 1, 2.5, 0.1, 1.5)),
]


def test_grads():
    with plax.enable_x64():
        for f, args in GRAD_CASES:
            args = tuple(np.asarray(np.broadcast_to(a, SHAPE), F64) for a in args)
            check_grads(f, args, order=1, modes=("fwd", "rev"))
        # as in JAX, betainc has no derivative in a or b
        with pytest.raises(ValueError, match="gradient with respect to a and b not supported"):
            plax.grad(S.beta.cdf, argnums=1)(0.3, 2.5, 1.5)


# norm.logpdf and cauchy.logpdf in JAX's order of operations, so that values and gradients
# round as JAX 0.10.2's, eagerly and under jit (bits below; blackjax's window adaptation
# drifted through them). Per row: the values, then d/dloc and d/dscale eagerly and jitted.
BITS_X = np.float32([28, 8, -3, 7, -1, 1, 18, 12])
BITS_SCALE = np.float32([15, 10, 16, 11, 9, 11, 10, 18])
JAX_BITS = [
    (S.norm.logpdf,
     [3232305122, 3227466485, 3228432400, 3227436574, 3225981823, 3226750233, 3231119780,
      3229627424],
     (1054324363, [1042144286, 3175043836, 3178385244, 3178903777, 3185274820, 3183086360,
                   1045172908, 3171540978]),
     (1054324362, [1042144286, 3175043836, 3178385244, 3178903778, 3185274820, 3183086360,
                   1045172908, 3171540978])),
    (S.cauchy.logpdf,
     [3232370314, 3229087596, 3229485794, 3228885578, 3227001078, 3227698830, 3231358560,
      3230384478],
     (1050374616, [1024617618, 3170475956, 3177579142, 3174853377, 3184779397, 3183077297,
                   1028419474, 3167079422]),
     (1050374616, [1024617618, 3170475953, 3177579142, 3174853377, 3184779397, 3183077297,
                   1028419473, 3167079422])),
]


@pytest.mark.parametrize("f,value,eager,jitted", JAX_BITS, ids=["norm", "cauchy"])
def test_logpdf_bits_as_jax(f, value, eager, jitted):
    bits = lambda a: np.asarray(a).view(np.uint32).tolist()
    loss = lambda loc, scale: plax.numpy.sum(f(BITS_X, loc, scale))
    for run, grads in ((lambda g: g, eager), (plax.jit, jitted)):
        assert bits(run(f)(BITS_X, np.float32(0.7), BITS_SCALE)) == value
        g_loc, g_scale = run(plax.grad(loss, (0, 1)))(np.float32(0.7), BITS_SCALE)
        assert (bits(g_loc), bits(g_scale)) == grads
