"""First-order optimizers as function triples, as ``jax.example_libraries.optimizers``.

An optimizer is ``(init_fun, update_fun, get_params)``:

* ``init_fun(params) -> opt_state`` for a pytree of parameters;
* ``update_fun(step, grads, opt_state) -> opt_state`` with ``grads`` shaped as the params;
* ``get_params(opt_state) -> params``.

Each optimizer here is written for one array and lifted to pytrees by the ``optimizer``
decorator. The state is an ``OptimizerState`` (a pytree node, so it passes through jit,
vmap and friends): the flat list of per-leaf states with the structures needed to
rebuild them. ``step_size`` arguments take a number or a schedule (step -> step size).
"""
from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Callable
from typing import Any, NamedTuple

import plax.numpy as jnp
from plax import tree_util

OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
OptimizerState.__doc__ = """The state of a pytree optimizer: ``packed_state`` holds, per
parameter leaf, the flat leaves of that leaf's state; ``tree_def`` is the parameters'
structure and ``subtree_defs`` the structure of each leaf's state."""

# Only the packed states are children: the structures travel as static data.
tree_util.register_pytree_node(
    OptimizerState,
    lambda state: ((state.packed_state,), (state.tree_def, state.subtree_defs)),
    lambda static, children: OptimizerState(children[0], static[0], static[1]))

Array = Any
Params = Any  # a pytree of arrays
State = Any  # the state of one parameter array
Updates = Params  # gradients, shaped as the parameters

InitFn = Callable[[Params], OptimizerState]
Step = int
UpdateFn = Callable[[Step, Updates, OptimizerState], OptimizerState]
ParamsFn = Callable[[OptimizerState], Params]
Schedule = Callable[[Step], float]


class Optimizer(NamedTuple):
    """The (init_fn, update_fn, params_fn) triple an optimizer constructor returns."""
    init_fn: InitFn
    update_fn: UpdateFn
    params_fn: ParamsFn


def _flatten_each(trees):
    """(flat leaves of each tree, treedef of each tree), as two tuples."""
    flat = [tree_util.tree_flatten(t) for t in trees]
    return tuple(leaves for leaves, _ in flat), tuple(treedef for _, treedef in flat)


def _unflatten_each(treedefs, leaf_lists):
    if len(treedefs) != len(leaf_lists):
        raise ValueError(f"optimizer state is inconsistent: {len(treedefs)} state structures "
                         f"for {len(leaf_lists)} packed states.")
    return [tree_util.tree_unflatten(t, leaves) for t, leaves in zip(treedefs, leaf_lists)]


def optimizer(opt_maker: Callable[..., tuple[Callable[[Params], State],
                                             Callable[[Step, Updates, Params], Params],
                                             Callable[[State], Params]]]
              ) -> Callable[..., Optimizer]:
    """Decorator lifting an optimizer written for single arrays to pytrees of arrays.

    ``opt_maker(*args, **kwargs)`` returns ``(init, update, get_params)`` acting on one
    array and its state (any pytree); the decorated constructor returns an ``Optimizer``
    whose functions act leaf by leaf on a pytree of parameters, keeping the state as an
    ``OptimizerState``.
    """
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree):
            x0_flat, tree = tree_util.tree_flatten(x0_tree)
            states_flat, subtrees = _flatten_each([init(x0) for x0 in x0_flat])
            return OptimizerState(states_flat, tree, subtrees)

        @functools.wraps(update)
        def tree_update(i, grad_tree, opt_state):
            states_flat, tree, subtrees = opt_state
            grad_flat, grad_tree_def = tree_util.tree_flatten(grad_tree)
            if grad_tree_def != tree:
                raise TypeError(
                    "optimizer update function was passed a gradient tree that did not match "
                    f"the parameter tree structure with which it was initialized: parameters "
                    f"{tree}, gradients {grad_tree_def}. Pass gradients shaped as the "
                    "parameters (e.g. from grad of a loss of get_params(opt_state)).")
            states = _unflatten_each(subtrees, states_flat)
            new_states = [update(i, g, s) for g, s in zip(grad_flat, states)]
            new_states_flat, new_subtrees = _flatten_each(new_states)
            for before, after in zip(subtrees, new_subtrees):
                if after != before:
                    raise TypeError(
                        "optimizer update function produced an output structure that did not "
                        f"match its input structure: input {before}, output {after}. An "
                        "update must return a state of the structure init returned.")
            return OptimizerState(new_states_flat, tree, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state):
            states_flat, tree, subtrees = opt_state
            params = [get_params(s) for s in _unflatten_each(subtrees, states_flat)]
            return tree_util.tree_unflatten(tree, params)

        return Optimizer(tree_init, tree_update, tree_get_params)
    return tree_opt_maker


# --- optimizers ---------------------------------------------------------------------------
def _params_first(state):
    return state[0]


@optimizer
def sgd(step_size):
    """Stochastic gradient descent: ``x <- x - step_size(i) * g``."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0

    def update(i, g, x):
        return x - step_size(i) * g

    def get_params(x):
        return x
    return Optimizer(init, update, get_params)


@optimizer
def momentum(step_size: Schedule, mass: float):
    """SGD with momentum: ``v <- mass * v + g``, ``x <- x - step_size(i) * v``."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * velocity, velocity
    return init, update, _params_first


@optimizer
def nesterov(step_size: Schedule, mass: float):
    """SGD with Nesterov momentum: ``v <- mass * v + g``, ``x <- x - step_size(i) *
    (mass * v + g)``."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g), velocity
    return init, update, _params_first


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad (Duchi et al., 2011) with momentum on the scaled gradient: the gradient is
    divided by the root of the running sum of its squares."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        inv_root = jnp.where(g_sq > 0, 1. / jnp.sqrt(g_sq), 0.0)
        m = (1. - momentum) * (g * inv_root) + momentum * m
        return x - step_size(i) * m, g_sq, m
    return init, update, _params_first


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """RMSProp: the gradient divided by the root of a decaying (``gamma``) average of its
    squares, plus ``eps``."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg_sq_grad + eps), avg_sq_grad
    return init, update, _params_first


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp whose scaled steps accumulate in a momentum term (decay ``momentum``)."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq_grad + eps)
        return x - mom, avg_sq_grad, mom
    return init, update, _params_first


def _bias_correction(beta, like, i):
    """``1 - beta ** (i + 1)`` in the moments' dtype."""
    return 1 - jnp.asarray(beta, like.dtype) ** (i + 1)


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma and Ba, 2014): bias-corrected decaying averages of the gradient (``b1``)
    and of its square (``b2``); the step is ``step_size(i) * m_hat / (sqrt(v_hat) + eps)``."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        m_hat = m / _bias_correction(b1, m, i)
        v_hat = v / _bias_correction(b2, m, i)
        return x - step_size(i) * m_hat / (jnp.sqrt(v_hat) + eps), m, v
    return init, update, _params_first


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax: Adam with the second moment replaced by a decaying infinity norm
    ``u <- max(b2 * u, |g|)``."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        x = x - (step_size(i) / _bias_correction(b1, m, i)) * m / (u + eps)
        return x, m, u
    return init, update, _params_first


def _expand_to_axis(v, ndim, axis):
    """A vector ``v`` seen as an ``ndim``-dimensional array varying along ``axis`` only."""
    index = [None] * ndim
    index[axis:axis + 1] = [slice(None)]  # a 0-d gradient still takes the vector as is
    return v[tuple(index)]


@optimizer
def sm3(step_size, momentum=0.9):
    """SM3 (Anil et al., 2019): Adagrad whose accumulator is kept as one vector per axis
    (the max over the other axes), with momentum on the scaled gradient."""
    step_size = make_schedule(step_size)

    def init(x0):
        x_shape = x0.shape
        x0 = jnp.atleast_1d(x0)
        accumulators = [jnp.zeros(n, dtype=x0.dtype) for n in x0.shape]
        return x0, jnp.zeros_like(x0), accumulators, x_shape

    def update(i, g, state):
        x, m, accumulators, x_shape = state
        cover = [_expand_to_axis(v, g.ndim, axis) for axis, v in enumerate(accumulators)]
        accum = functools.reduce(jnp.minimum, cover) + jnp.square(g)
        inv_root = jnp.where(accum > 0, 1. / jnp.sqrt(accum), 0)
        m = (1. - momentum) * (g * inv_root) + momentum * m
        x = x - step_size(i) * m
        accumulators = [accum.max(tuple(a for a in range(x.ndim) if a != axis))
                        for axis in range(x.ndim)]
        return x, m, accumulators, x_shape

    def get_params(state):
        x, _, _, x_shape = state
        return x.reshape(x_shape)
    return init, update, get_params


# --- step-size schedules ------------------------------------------------------------------
def constant(step_size) -> Schedule:
    """The schedule returning ``step_size`` at every step."""
    def schedule(i):
        return step_size
    return schedule


def exponential_decay(step_size, decay_steps, decay_rate):
    """``step_size * decay_rate ** (i / decay_steps)``."""
    def schedule(i):
        return step_size * decay_rate ** (i / decay_steps)
    return schedule


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False):
    """``step_size / (1 + decay_rate * i / decay_steps)``; with ``staircase`` the ratio
    ``i / decay_steps`` is floored."""
    if staircase:
        def schedule(i):
            return step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    else:
        def schedule(i):
            return step_size / (1 + decay_rate * i / decay_steps)
    return schedule


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0):
    """From ``step_size`` to ``final_step_size`` along ``(1 - i / decay_steps) ** power``
    over ``decay_steps`` steps, then constant."""
    def schedule(step_num):
        step_num = jnp.minimum(step_num, decay_steps)
        fraction_left = (1 - step_num / decay_steps) ** power
        return fraction_left * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries: Any, values: Any):
    """``values[k]`` for steps in ``(boundaries[k-1], boundaries[k]]``: ``values`` has one
    entry more than ``boundaries``."""
    boundaries = jnp.array(boundaries)
    values = jnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("boundaries and values must be sequences: got arrays of shapes "
                         f"{boundaries.shape} and {values.shape}; pass two 1-D sequences.")
    if boundaries.shape[0] != values.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length: got "
                         f"{boundaries.shape[0]} boundaries and {values.shape[0]} values.")

    def schedule(i):
        return values[jnp.sum(i > boundaries)]
    return schedule


def make_schedule(scalar_or_schedule: float | Schedule) -> Schedule:
    """A schedule as it is (a callable), or a scalar as a constant schedule."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(f"{type(scalar_or_schedule)}: a step size must be a scalar or a callable "
                    f"schedule (step -> step size), got a value of shape "
                    f"{jnp.shape(scalar_or_schedule)}.")


# --- utilities ----------------------------------------------------------------------------
def l2_norm(tree):
    """The l2 norm of all the leaves of a pytree of arrays, taken together."""
    leaves = tree_util.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree, max_norm):
    """Scales a pytree of gradients down to l2 norm ``max_norm`` when its norm exceeds it."""
    norm = l2_norm(grad_tree)
    return tree_util.tree_map(lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)),
                              grad_tree)


# --- (de)serialization --------------------------------------------------------------------
class JoinPoint:
    """A pytree leaf holding one parameter's state: where the parameters' tree ends and a
    state's tree begins, in ``unpack_optimizer_state``'s result."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __iter__(self):
        # Iterable like the containers serializers walk.
        yield self.subtree


def unpack_optimizer_state(opt_state):
    """An OptimizerState as a plain pytree: the parameters' structure with a JoinPoint
    holding each leaf's state (for saving with a pytree serializer)."""
    states_flat, tree_def, subtree_defs = opt_state
    subtrees = _unflatten_each(subtree_defs, states_flat)
    return tree_util.tree_unflatten(tree_def, [JoinPoint(s) for s in subtrees])


def pack_optimizer_state(marked_pytree):
    """The inverse of ``unpack_optimizer_state``: a pytree whose leaves are JoinPoints back
    to an OptimizerState."""
    join_points, tree_def = tree_util.tree_flatten(marked_pytree)
    strays = [type(p).__name__ for p in join_points if not isinstance(p, JoinPoint)]
    if strays:
        raise TypeError(f"pack_optimizer_state: every leaf of marked_pytree must be a "
                        f"JoinPoint (as unpack_optimizer_state makes), found leaves of types "
                        f"{sorted(set(strays))}.")
    states_flat, subtree_defs = _flatten_each([p.subtree for p in join_points])
    return OptimizerState(states_flat, tree_def, subtree_defs)
