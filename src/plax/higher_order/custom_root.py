"""``lax.custom_root``: a root of ``f`` found by the user's solver, differentiated implicitly.

As in JAX it is a ``custom_jvp`` function, no primitive of its own: its value is
``solve(f, initial_guess)``, and at the root x of f(x, theta) = 0 the tangent is
dx = -(df/dx)^{-1} (df/dtheta . dtheta), computed with the user's ``tangent_solve`` on
the linearisation of f at x. The values f closes over (theta) become explicit arguments
(``closure_convert``) so that their tangents reach the rule; the guess carries none.
"""
from __future__ import annotations

from plax import tree_util
from plax.first_order import arithmetic as _arithmetic
from plax.first_order import conversion as _conversion
from plax.first_order.ad_util import instantiate
from plax.higher_order.closure_convert import closure_convert
from plax.higher_order.custom_derivatives import custom_jvp, zero_from_primal
from plax.core.staging import trace_to_jaxpr
from plax.core.trace import get_aval
from plax.transforms.jvp import jvp_flat
from plax.core.tracebacks import api_boundary

__all__ = ["custom_root"]


def _tangent(fun, primals, tangents):
    """The output tangent leaves of ``fun`` (a function of leaves returning a pytree)."""
    def flat(*xs):
        return tree_util.tree_leaves(fun(*xs))
    _, tans = jvp_flat(flat, list(primals), list(tangents), "custom_root")
    return [instantiate(t) for t in tans]


@api_boundary
def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """A root of ``f`` (``f(x) == 0``) found by ``solve(f, initial_guess)``, whose derivative
    is found implicitly with ``tangent_solve(g, y)`` (solving the linear ``g(x) == y``)
    rather than by differentiating the solver. With ``has_aux``, ``solve`` returns
    ``(root, aux)``; ``aux`` carries no derivative.
    """
    guess_leaves, guess_tree = tree_util.tree_flatten(initial_guess)
    f_conv, f_consts = closure_convert(f, initial_guess)

    def f_at(x_leaves, theta):
        return f_conv(tree_util.tree_unflatten(guess_tree, list(x_leaves)), *theta)

    def f_lin_at(x, theta):
        def f_lin(t):
            t_leaves = [instantiate(v) for v in tree_util.tree_leaves(t)]
            return tree_util.tree_unflatten(
                guess_tree, _tangent(lambda *xs: f_at(xs, theta), x, t_leaves))
        return f_lin

    # As JAX does, tangent_solve is traced now (on the guess's types), so that its errors
    # and an output that does not match the guess surface at the call, not when the root is
    # differentiated.
    def solve_tangents(*x):
        out = tangent_solve(f_lin_at(list(x), list(f_consts)),
                            tree_util.tree_unflatten(guess_tree, list(x)))
        if tree_util.tree_structure(out) != guess_tree:
            raise TypeError("custom_root: tangent_solve() output pytree structure must match "
                            f"initial_guess, got {tree_util.tree_structure(out)} and "
                            f"{guess_tree}.")
        return tree_util.tree_leaves(out)
    trace_to_jaxpr(solve_tangents, [get_aval(g) for g in guess_leaves],
                   description="custom_root tangent_solve")

    def solve_with(guess, *theta):
        out = solve(lambda x: f_conv(x, *theta), guess)
        sol = out[0] if has_aux else out
        if tree_util.tree_structure(sol) != guess_tree:
            raise TypeError("custom_root: solve() output pytree structure must match "
                            f"initial_guess, got {tree_util.tree_structure(sol)} and "
                            f"{guess_tree}.")
        return out

    # What solve closes over carries no derivative (the root does not depend on the solver).
    solve_conv, s_consts = closure_convert(solve_with, initial_guess, *f_consts)
    s_consts = [_conversion.stop_gradient(c) for c in s_consts]

    def root(guess_leaves, theta, solver_consts):
        guess = tree_util.tree_unflatten(guess_tree, list(guess_leaves))
        return solve_conv(guess, *theta, *solver_consts)

    root = custom_jvp(root)

    @root.defjvp
    def _root_jvp(primals, tangents):
        guess, theta, solver_consts = primals
        _, theta_dot, _ = tangents
        out = root(guess, theta, solver_consts)
        sol = out[0] if has_aux else out
        x = tree_util.tree_leaves(sol)
        # df/dtheta . dtheta at the root, then dx = -tangent_solve(df/dx, that).
        rhs = _tangent(lambda *th: f_at(x, th), theta, theta_dot)
        rhs_tree = tree_util.tree_unflatten(guess_tree, rhs)
        x_dot = tree_util.tree_map(_arithmetic.neg, tangent_solve(f_lin_at(x, theta), rhs_tree))
        if has_aux:
            return out, (x_dot, zero_from_primal(out[1], symbolic_zeros=True))
        return out, x_dot

    return root(list(guess_leaves), list(f_consts), list(s_consts))
