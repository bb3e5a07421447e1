"""Which values reverse mode keeps from the forward pass (``print_saved_residuals``)."""
from __future__ import annotations

from plax import tree_util
from plax.core.source_info import flat_arg_names, fun_name
from plax.core.staging import StagingTrace, StagingTracer
from plax.core.trace import current_trace, get_aval, set_current_trace
from plax.transforms.linearize import linearize_flat


def saved_residuals(fun, *args, **kwargs) -> list:
    """``[(aval, why), ...]``: each value the backward pass of ``fun`` at ``args`` keeps.

    ``why`` says where it comes from: an argument (by name), the output of a
    primitive or a value named by ``checkpoint_name`` (with the user's source line and
    column), or a constant.
    """
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    names = flat_arg_names(fun, args, kwargs)

    def flat_fun(*flat):
        a, kw = tree_util.tree_unflatten(in_tree, list(flat))
        return tree_util.tree_leaves(fun(*a, **kw))

    name = fun_name(fun)
    outer = StagingTrace(current_trace(), f"saved_residuals({name})", names)
    tracers = [outer.new_arg(get_aval(x)) for x in leaves]
    try:
        with set_current_trace(outer):
            _, linear, _ = linearize_flat(flat_fun, tracers, name)
    finally:
        outer.finish()
    made_at = {v: i for i, e in enumerate(outer.eqns) for v in e.outvars}
    # A value checkpoint_name names is reported as the named value (``name`` is an identity
    # JAX forwards its input through), where the name is given.
    for i, e in enumerate(outer.eqns):
        if e.primitive.name == "name" and e.invars[0] in made_at:
            made_at[e.invars[0]] = i
    found = [(_order(outer, res, made_at, k), var.aval, _origin(outer, res, names, made_at))
             for k, (res, var) in enumerate(zip(linear.consts, linear.jaxpr.constvars))]
    return [(aval, why) for _, aval, why in sorted(found, key=lambda t: t[0])]


def _is_own(outer: StagingTrace, res) -> bool:
    return isinstance(res, StagingTracer) and res._trace is outer


def _order(outer, res, made_at, k) -> tuple:
    """Arguments first (in order), then outputs in program order, then constants."""
    if not _is_own(outer, res):
        return (2, k)
    if res._var in outer.invars:
        return (0, outer.invars.index(res._var))
    return (1, made_at[res._var])


def _origin(outer: StagingTrace, res, names, made_at) -> str:
    if not _is_own(outer, res):
        return "from a constant"
    if res._var in outer.invars:
        i = outer.invars.index(res._var)
        return f"from the argument {names[i] if i < len(names) else i}"
    eqn = outer.eqns[made_at[res._var]]
    where = eqn.source_info.location() if eqn.source_info else ""
    what = f"named '{eqn.params['name']}'" if eqn.primitive.name == "name" else \
        f"output of {eqn.primitive.name}"
    return what + (f" from {where}" if where else "")


def print_saved_residuals(fun, *args, **kwargs) -> None:
    """Print, one per line, the residuals reverse mode saves for ``fun`` at ``args``."""
    for aval, why in saved_residuals(fun, *args, **kwargs):
        print(f"{aval.str_short()} {why}")
