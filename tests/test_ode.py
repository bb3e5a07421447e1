"""plax.experimental.ode: odeint against closed forms and SciPy's solve_ivp, its adjoint-method
gradients against finite differences, under jit and vmap; the step-control helpers."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import plax
import plax.numpy as jnp
from plax.experimental import ode
from plax.experimental.ode import odeint
from plax.test_util import check_grads

TS = np.linspace(0., 1.5, 5)


def decay(y, t, k):
    return -k * y


def oscillator(state, t, omega):
    x, v = state
    return jnp.stack([v, -omega ** 2 * x])


def forced(y, t, a, b):  # dy/dt = a*y + sin(b*t): depends on t, as a pytree of args
    return a * y + jnp.sin(b * t)


# name -> (func, y0, args, closed form of y(t))
CLOSED_FORMS = {
    "decay": (decay, np.array([1.0, 2.0]), (0.7,),
              lambda t: np.exp(-0.7 * t)[:, None] * np.array([1.0, 2.0])),
    "oscillator": (oscillator, np.array([1.0, 0.0]), (2.0,),
                   lambda t: np.stack([np.cos(2 * t), -2 * np.sin(2 * t)], -1)),
}


@pytest.mark.parametrize("name", sorted(CLOSED_FORMS))
def test_odeint_matches_closed_form(name):
    func, y0, args, exact = CLOSED_FORMS[name]
    with plax.enable_x64():
        ys = odeint(func, jnp.asarray(y0), jnp.asarray(TS), *args, rtol=1e-10, atol=1e-10)
        assert ys.dtype == np.float64 and ys.shape == (len(TS), 2)
        np.testing.assert_allclose(np.asarray(ys), exact(TS), rtol=1e-8, atol=1e-8)


def test_odeint_matches_solve_ivp_with_time_dependence():
    with plax.enable_x64():
        ys = odeint(forced, jnp.asarray([0.5]), jnp.asarray(TS), -0.3, 4.0, rtol=1e-9, atol=1e-9)
    ref = solve_ivp(lambda t, y: -0.3 * y + np.sin(4.0 * t), (TS[0], TS[-1]), [0.5],
                    t_eval=TS, rtol=1e-11, atol=1e-11, method="DOP853")
    np.testing.assert_allclose(np.asarray(ys)[:, 0], ref.y[0], rtol=1e-7, atol=1e-8)


def test_odeint_float32_dtype_and_values():
    ys = odeint(decay, jnp.float32(1.0), jnp.linspace(0., 1., 4), 2.0)
    assert ys.dtype == np.float32 and ys.shape == (4,)
    np.testing.assert_allclose(np.asarray(ys), np.exp(-2.0 * np.linspace(0, 1, 4)), rtol=2e-6)


def test_odeint_pytree_state():
    def f(y, t):
        return {"a": -y["a"], "b": jnp.sum(y["a"])}
    ys = odeint(f, {"a": jnp.ones(2), "b": 0.}, jnp.linspace(0., 1., 4))
    t = np.linspace(0., 1., 4)
    assert ys["a"].shape == (4, 2) and ys["b"].shape == (4,)
    np.testing.assert_allclose(np.asarray(ys["a"]), np.exp(-t)[:, None].repeat(2, 1), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ys["b"]), 2 * (1 - np.exp(-t)), rtol=1e-5, atol=1e-6)


def test_odeint_closure_over_traced_values_under_jit_and_grad():
    def final(k):
        return odeint(lambda y, t: -k * y, 1.0, jnp.array([0., 1.]))[-1]
    np.testing.assert_allclose(float(plax.jit(final)(2.0)), np.exp(-2.0), rtol=1e-5)
    np.testing.assert_allclose(float(plax.grad(final)(2.0)), -np.exp(-2.0), rtol=1e-4)


def test_odeint_under_jit_and_vmap():
    ts = jnp.linspace(0., 1., 3)
    rates = jnp.array([0.5, 1.0, 2.0])
    batched = plax.jit(plax.vmap(lambda k: odeint(decay, 1.0, ts, k)))(rates)
    expected = np.exp(-np.outer(np.asarray(rates), np.linspace(0, 1, 3)))
    np.testing.assert_allclose(np.asarray(batched), expected, rtol=1e-5)
    per_y0 = plax.vmap(lambda y0: odeint(decay, y0, ts, 1.0))(jnp.array([1.0, 3.0]))
    np.testing.assert_allclose(np.asarray(per_y0), np.array([[1.], [3.]]) * np.exp(-np.linspace(0, 1, 3)),
                               rtol=1e-5)


def test_odeint_gradients_against_closed_form():
    # y(T) = y0 exp(-k T): d/dy0 = exp(-kT), d/dk = -T y0 exp(-kT), d/dT = -k y0 exp(-kT)
    with plax.enable_x64():
        def last(y0, k, ts):
            return odeint(decay, y0, ts, k, rtol=1e-10, atol=1e-10)[-1]
        ts = jnp.array([0.0, 0.4, 1.2])
        g_y0, g_k, g_ts = plax.grad(last, (0, 1, 2))(2.0, 0.5, ts)
        e = np.exp(-0.5 * 1.2)
        np.testing.assert_allclose(float(g_y0), e, rtol=1e-7)
        np.testing.assert_allclose(float(g_k), -1.2 * 2.0 * e, rtol=1e-7)
        # moving t[0] forward shortens the interval: +k y(T); the middle time is not used
        np.testing.assert_allclose(np.asarray(g_ts), [0.5 * 2.0 * e, 0.0, -0.5 * 2.0 * e],
                                   rtol=1e-7, atol=1e-10)


def test_odeint_gradients_check_grads_rev():
    with plax.enable_x64():
        def sol(y0, omega, ts):
            return odeint(oscillator, y0, ts, omega, rtol=1e-10, atol=1e-10)
        check_grads(sol, (jnp.array([1.0, 0.3]), 1.7, jnp.array([0.0, 0.5, 1.0])), order=1,
                    modes=["rev"], atol=1e-5, rtol=1e-5)
        check_grads(lambda y0, a, b: odeint(forced, y0, jnp.array([0., 0.7]), a, b,
                                            rtol=1e-10, atol=1e-10),
                    (jnp.array([0.5]), -0.3, 4.0), order=1, modes=["rev"], atol=1e-5, rtol=1e-5)


def test_odeint_second_order_reverse():
    with plax.enable_x64():
        f = lambda k: odeint(decay, 1.0, jnp.array([0., 1.]), k, rtol=1e-10, atol=1e-10)[-1]
        # d2/dk2 exp(-k) = exp(-k)
        np.testing.assert_allclose(float(plax.grad(plax.grad(f))(0.8)), np.exp(-0.8), rtol=1e-6)


def test_odeint_forward_mode_is_refused():
    with pytest.raises(TypeError, match=r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp"):
        plax.jvp(lambda y0: odeint(decay, y0, jnp.linspace(0., 1., 3), 1.0), (1.0,), (1.0,))


def test_odeint_mxstep_stops_and_hmax_limits_steps():
    ts = jnp.linspace(0., 1., 4)
    # at most five steps of at most 0.01 towards each time: the values are the last step's
    # interpolant extrapolated (JAX 0.10.2's numbers)
    ys = np.asarray(odeint(decay, 1.0, ts, 2.0, hmax=0.01, mxstep=5))
    np.testing.assert_allclose(ys, [1., 0.53992456, -10.169835, -0.6387683], rtol=1e-4)
    full = np.asarray(odeint(decay, 1.0, ts, 2.0, hmax=0.05))
    np.testing.assert_allclose(full, np.exp(-2 * np.linspace(0, 1, 4)), rtol=1e-5)


@pytest.mark.parametrize("args, t, match", [
    (("a",), jnp.linspace(0., 1., 3), "The contents of odeint \\*args must be arrays or scalars"),
    ((1.0,), jnp.arange(3), "t must be an array of floats"),
])
def test_odeint_bad_input(args, t, match):
    with pytest.raises(TypeError, match=match):
        odeint(decay, 1.0, t, *args)


# --- the step-control helpers ---------------------------------------------------------------
def test_runge_kutta_step_is_fifth_order_on_exp():
    with plax.enable_x64():
        f = lambda y, t: y
        y0 = jnp.array([1.0])
        for dt in (0.1, 0.05):
            y1, f1, err, k = ode.runge_kutta_step(f, y0, f(y0, 0.), jnp.float64(0.), jnp.float64(dt))
            assert k.shape == (7, 1)
            # local error O(dt^6); error estimate O(dt^5)
            assert abs(float(y1[0]) - np.exp(dt)) < 2 * dt ** 6 / 720 + 1e-15
            np.testing.assert_allclose(np.asarray(f1), np.asarray(y1))
            assert abs(float(err[0])) < dt ** 5


def test_interpolant_reproduces_ends_and_slopes():
    with plax.enable_x64():
        f = lambda y, t: jnp.cos(t) * y
        y0, dt = jnp.array([1.0]), jnp.float64(0.2)
        y1, _, _, k = ode.runge_kutta_step(f, y0, f(y0, 0.), jnp.float64(0.), dt)
        coeffs = ode.interp_fit_dopri(y0, y1, k, dt)
        assert coeffs.shape == (5, 1)
        np.testing.assert_allclose(np.asarray(jnp.polyval(coeffs, 0.0)), np.asarray(y0))
        np.testing.assert_allclose(np.asarray(jnp.polyval(coeffs, 1.0)), np.asarray(y1))
        mid = float(jnp.polyval(coeffs, 0.5)[0])
        assert abs(mid - np.exp(np.sin(0.1))) < 1e-6


def test_step_size_helpers():
    with plax.enable_x64():
        np.testing.assert_allclose(float(ode.optimal_step_size(0.1, jnp.float64(0.0))), 1.0)      # ifactor
        np.testing.assert_allclose(float(ode.optimal_step_size(0.1, jnp.float64(1e6))), 0.02)     # dfactor
        np.testing.assert_allclose(float(ode.optimal_step_size(0.1, jnp.float64(0.5))),
                                   0.1 * min(10., 0.9 * 0.5 ** -0.2))
        # an accepted step is never shrunk
        np.testing.assert_allclose(float(ode.optimal_step_size(0.1, jnp.float64(0.99))), 0.1)
        ratio = ode.mean_error_ratio(jnp.array([1e-3, 2e-3]), 0.0, 1e-3, jnp.zeros(2), jnp.zeros(2))
        np.testing.assert_allclose(float(ratio), np.sqrt(2.5))
        assert float(ode.abs2(3 + 4j)) == 25.0
        h = ode.initial_step_size(lambda y, t: -y, 0.0, jnp.array([1.0]), 4, 1e-6, 1e-6,
                                  jnp.array([-1.0]))
        assert 0 < float(h) <= 0.01 * 100
        coeffs = ode.fit_4th_order_polynomial(jnp.array(0.), jnp.array(1.), jnp.array(0.25),
                                              jnp.array(0.), jnp.array(2.), jnp.array(1.))
        np.testing.assert_allclose([float(c) for c in coeffs], [0, 0, 1, 0, 0], atol=1e-12)  # s**2


def test_ravel_first_arg():
    unravel = plax.flatten_util.ravel_pytree({"a": jnp.zeros(2), "b": 0.})[1]
    f = ode.ravel_first_arg(lambda y, c: {"a": y["a"] * c, "b": y["b"] + c}, unravel)
    np.testing.assert_allclose(np.asarray(f(jnp.array([1., 2., 3.]), 2.)), [2., 4., 5.])
