"""plax.scipy.stats discrete distributions and summary statistics against scipy.stats (f32 and
f64), JAX 0.10's conventions for non-integer counts, jit, vmap and check_grads."""
import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as ss

import plax
from plax.scipy import stats as S
from plax.test_util import check_grads
from helpers import check_table, close

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
INF, NAN = np.inf, np.nan
SHAPE = (2, 12)  # as in test_stats.py: the same compiled programs serve both files


def col(*v):
    return np.array(v, float)[:, None]


K = np.array([[-3, -1, 0, 1, 2, 3, 5, 8, 13, 20, 40, NAN]])
QD = np.array([[-0.5, 1e-3, 0.15, 0.3, 0.5, 0.69, 0.71, 0.9, 0.95, 1, 1.5, NAN]])
LOC = col(0, 1)


def _family(mod, ref, fns, args):
    return [(getattr(mod, f), getattr(ref, f), args) for f in fns]


PMF = ("logpmf", "pmf")
DISCRETE = [
    *_family(S.poisson, ss.poisson, PMF + ("cdf",), (K, col(0.5, 7), LOC)),
    *_family(S.bernoulli, ss.bernoulli, PMF, (K, col(0.3, 1.0), LOC)),
    (S.bernoulli.cdf, ss.bernoulli.cdf, (K, col(0.3, 0.9))),
    (S.bernoulli.ppf, ss.bernoulli.ppf, (QD, col(0.3, 0.9))),
    *_family(S.geom, ss.geom, PMF, (K, col(0.3, 1.0), LOC)),
    *_family(S.binom, ss.binom, PMF, (K, col(5, 30), col(0.3, 0.9), col(0, -1))),
    *_family(S.nbinom, ss.nbinom, PMF, (K, col(2, 7.5), col(0.4, 0.95), LOC)),
    *_family(S.betabinom, ss.betabinom, PMF, (K, col(5, 30), col(0.5, 3), col(2, 0.7), LOC)),
]


def test_discrete_f32():
    check_table(DISCRETE, F32, SHAPE, rtol=5e-5, atol=1e-6)


def test_discrete_f64():
    with plax.enable_x64():
        check_table(DISCRETE, F64, SHAPE, rtol=1e-11, atol=1e-13)


# The Poisson entropy, summed exactly at 40 digits (24 values: SHAPE-d arrays).
ENTROPY = [(0.1, 0.33367699650123263254), (0.5, 0.92763746749579737414),
           (1, 1.3048422422562514843), (2, 1.7048826439329838384),
           (3, 1.9314701981485689339), (5, 2.2043952434283679071),
           (7.25, 2.3969224682588891922), (9.9, 2.5562895958855718509),
           (15, 2.7672043867812816457), (20, 2.9125264001823180585),
           (30, 3.1167110399882366122), (45, 3.3203967414504694387),
           (49.9, 3.3722618502538649263), (50, 3.3732662611702073252),
           (50.1, 3.3742686583273050284), (60, 3.4647100978583221867),
           (100, 3.7206860722602588868), (150, 3.9236987569806772785),
           (1000, 4.8727327976428506462), (5000, 5.6775184605790357194),
           (0, 0), (-1, NAN), (INF, INF), (NAN, NAN)]


def test_poisson_entropy():
    mu, want = (v.reshape(SHAPE) for v in np.array(ENTROPY).T)
    close(S.poisson.entropy(mu.astype(np.float32), np.float32(2)), want, F32, 5e-6)
    with plax.enable_x64():
        close(S.poisson.entropy(mu), want, F64, 1e-13)


def full(v):
    """``v`` broadcast to SHAPE as float32 (so the tables' compiled programs are reused)."""
    return np.asarray(np.broadcast_to(v, SHAPE), np.float32)


def test_jax_conventions_for_counts():
    """Non-integer counts, and quantiles at 0, as JAX 0.10 computes them."""
    k = full([[2.5, 3.7, 3.0, 3.5, 0.5, 1.5, 0, 1, 2, 5, 5.5, 9.5]])
    kk = k.astype(float)
    n, p = col(5.0, 2.5), 0.3
    lg = sp.gammaln
    # binom extends its formula to non-integer k, with support 0 <= k < n + 1 (k <= n for
    # whole numbers); nbinom and geom extend theirs too
    binom = lg(n + 1) - lg(kk + 1) - lg(n - kk + 1) + kk * np.log(p) + (n - kk) * np.log1p(-p)
    close(S.binom.logpmf(k, full(n), full(p)), np.where(kk < n + 1, binom, -INF), F32, 1e-5,
          1e-5)
    nbinom = lg(n + kk) - lg(n) - lg(kk + 1) + n * np.log(p) + kk * np.log1p(-p)
    close(S.nbinom.logpmf(k, full(n), full(p)), nbinom, F32, 1e-5, 1e-5)
    close(S.geom.logpmf(k, full(p)), np.where(kk < 1, -INF, (kk - 1) * np.log1p(-p) + np.log(p)),
          F32, 1e-5, 1e-5)
    # betabinom rounds k down; poisson is -inf off the integers (as SciPy)
    close(S.betabinom.logpmf(k, full(7.0), full(2.0), full(3.0)),
          ss.betabinom.logpmf(np.floor(kk), 7, 2, 3), F32, 1e-5, 1e-5)
    close(S.poisson.logpmf(k, full(2.0)), ss.poisson.logpmf(kk, 2), F32, 1e-5, 1e-5)
    # bernoulli is its formula anywhere in [0, 1]; its quantile at 0 is 0 (SciPy: -1)
    bern = np.where((kk < 0) | (kk > 1), -INF, kk * np.log(p) + (1 - kk) * np.log1p(-p))
    close(S.bernoulli.logpmf(k, full(p)), bern, F32, 1e-5, 1e-5)
    close(S.bernoulli.ppf(full(0.0), full(col(0.3, 1.0))), np.zeros(SHAPE), F32)


def test_multinomial():
    x = np.array([[1, 2, 3], [0, 0, 6], [2, 2, 2], [3, 4, -1]])
    p = np.float32([0.2, 0.3, 0.5])
    want = [ss.multinomial.logpmf(r, 6, p) for r in x[:3]] + [-INF]
    close(S.multinomial.logpmf(x, 6, p), want, F32, 1e-5)
    # per-row n (a count total off n is -inf); a category of probability 0 is fine while
    # its count is 0
    p0 = np.float32([0.2, 0.0, 0.8])
    close(S.multinomial.pmf(x, np.array([6, 6, 5, 6]), p0),
          [0, ss.multinomial.pmf([0, 0, 6], 6, p0), 0, 0], F32, 1e-5, 1e-7)
    with pytest.raises(ValueError, match="x and n must be of integer type"):
        S.multinomial.logpmf(x.astype(np.float32), 6, p)
    with pytest.raises(ValueError, match="x and n must be of integer type"):
        S.multinomial.logpmf(x, 6.0, p)


def test_mode_rankdata_sem():
    a = np.array([[3, 1, 2, 2], [0, 5, 5, 5], [4, 4, 1, 0]])
    for axis in (0, None):
        got, want = S.mode(a, axis=axis), ss.mode(a, axis=axis)
        close(got.mode, want.mode, np.int32)
        close(got.count, want.count, np.int32)
    r = S.mode(a, axis=1, keepdims=True)
    assert type(r).__name__ == "ModeResult" and r._fields == ("mode", "count")
    want = ss.mode(a, axis=1, keepdims=True)
    close(r.mode, want.mode, np.int32)
    close(r.count, want.count, np.int32)
    for method in ("average", "min", "max", "dense", "ordinal"):
        close(S.rankdata(a, method, axis=1), ss.rankdata(a, method, axis=1), F32, 0)
    close(S.rankdata(a), ss.rankdata(a), F32, 0)  # axis None: the flattened array
    # NaNs count as one value in mode and make their slice's ranks NaN
    f = np.float32([[1.5, NAN, NAN, 2], [1.5, NAN, 2, 2]])
    m = S.mode(f, axis=1)
    close(m.mode, [NAN, 2], F32)
    close(m.count, [2, 2], np.int32)
    close(S.rankdata(f, axis=1), [[NAN] * 4, [NAN] * 4], F32)
    # an empty axis: mode NaN with count 0, as floats
    e = S.mode(np.zeros((0, 3), np.int32))
    close(e.mode, [NAN] * 3, F32)
    close(e.count, [0] * 3, F32)
    g = np.float32([[1, 2, 3.5], [2, 5, 1], [0, 1, 1], [3, 3, 9]])
    g[1, 1] = NAN
    close(S.sem(g), ss.sem(g), F32, 1e-6)
    close(S.sem(g, axis=1, ddof=0, nan_policy="omit", keepdims=True),
          ss.sem(g, axis=1, ddof=0, nan_policy="omit", keepdims=True), F32, 1e-6)
    with pytest.raises(ValueError, match="Illegal nan_policy value 'bad'"):
        S.mode(a, nan_policy="bad")
    with pytest.raises(NotImplementedError, match="nan_policy` of omit is not implemented"):
        S.rankdata(a, nan_policy="omit")
    with pytest.raises(ValueError, match="unknown method 'mean'"):
        S.rankdata(a, "mean")
    with pytest.raises(ValueError, match="raise is not supported"):
        S.sem(g, nan_policy="raise")
    with pytest.raises(ValueError, match="axis 2 is out of bounds for array of dimension 2"):
        S.mode(a, axis=2)


def test_jit_and_vmap():
    """vmap and jit against SciPy; every operand a mapped SHAPE-d array."""
    k, n, p = full(K), full(col(5, 30)), full(col(0.3, 0.9))
    out = plax.jit(S.poisson.logpmf)(k, n)
    close(out, ss.poisson.logpmf(k, n), F32, 5e-5, 1e-6)
    close(plax.vmap(S.binom.pmf)(k, n, p), ss.binom.pmf(k, n, p), F32, 5e-5, 1e-6)
    close(plax.vmap(S.nbinom.logpmf, in_axes=1, out_axes=1)(k, n, p),
          ss.nbinom.logpmf(k, n, p), F32, 5e-5, 1e-6)
    a = np.array([[3, 1, 2, 2], [0, 5, 5, 5], [4, 4, 1, 0]], np.int32)
    m, c = plax.vmap(S.mode)(a)
    want = ss.mode(a, axis=1)
    close(m, want.mode, np.int32)
    close(c, want.count, np.int32)
    close(plax.vmap(lambda v: S.rankdata(v, "min"), in_axes=1, out_axes=1)(a),
          ss.rankdata(a, "min", axis=0), F32, 0)


def test_grads():
    k = np.asarray(np.broadcast_to(np.arange(12.0), SHAPE))
    mu = np.asarray(np.broadcast_to(col(0.5, 7), SHAPE))
    with plax.enable_x64():
        check_grads(lambda mu: S.poisson.logpmf(k, mu), (mu,), order=1, modes=("fwd", "rev"))
        check_grads(lambda n, p: S.nbinom.logpmf(k, n, p), (mu + 1, mu / 8), order=1,
                    modes=("fwd", "rev"))
        check_grads(lambda p: S.multinomial.logpmf(np.array([1, 2, 3]), 6, p),
                    (np.array([0.2, 0.3, 0.5]),), order=1, modes=("fwd", "rev"))
