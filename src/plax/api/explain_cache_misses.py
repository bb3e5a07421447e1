"""Why a jitted function traced again: ``jax_explain_cache_misses``.

On a tracing-cache miss ``JitWrapped`` calls :func:`explain`, which compares the new cache
key with the closest earlier key of the same function and logs, as one warning on the
logger ``"plax.cache_misses"`` (a child of ``"plax"``, so it propagates there), which
argument changed and how: shape, dtype, weak type, sharding in the type, pytree structure,
static value, a trace-context flag (x64, matmul precision, ...), the named axes in scope
or the context mesh. Silence it with the flag or with
``logging.getLogger("plax.cache_misses").setLevel(logging.ERROR)``.

The flag is three-valued. ``None`` (the default) explains a user function's retraces from
its 5th retrace on, each distinct cause once (plax's own jitted helpers are left out);
``True`` explains every trace, the first included; ``False`` never explains. Under
``jax_log_compiles`` the unset flag acts as ``True``.

A jit key is ``(in_tree, avals, static_key, trace_context, axis_env, mesh)``, see
``JitWrapped._entry``. A change of layout over an Auto mesh is no retrace (the type is the
same; only a new executable is compiled), so it is not explained here: ``jax_log_compiles``
shows those compilations.
"""
from __future__ import annotations

import collections
import inspect
import logging

from plax import tree_util
from plax.core.config import TRACE_FLAGS
from plax.core.source_info import is_plax_code, user_frame

logger = logging.getLogger("plax.cache_misses")

RETRACES_BEFORE_EXPLAINING = 4  # with the flag unset; JitWrapped._explain_miss counts them
_MAX_LINES = 12       # differences listed in one message
_MAX_CANDIDATES = 64  # earlier keys compared with (the most recent ones)


def explain(wrapped, key, entry, every: bool) -> None:
    """Log why ``wrapped`` (a JitWrapped) traced for ``key``. ``every``: explain each trace;
    otherwise only retraces of user functions, each cause once."""
    code = _code_of(wrapped._fun)
    if not every and (code is None or is_plax_code(code)):
        return
    name, n = wrapped._name, wrapped._state.function.n_traces
    defined = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "unknown"
    frame = user_frame()
    site = (f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"
            if frame is not None else "an unknown call site")
    head = f"TRACING CACHE MISS at {site}: {name} (defined at {defined})"
    earlier = _earlier_keys(wrapped, key)
    if not earlier:
        if every:
            logger.warning("%s is traced for the first time.", head)
        return
    diffs = _closest_differences(earlier, key, _Namer(wrapped._fun, key, entry))
    if not diffs:
        why = ("a trace with the same signature was made before but could not be cached: "
               f"{name} closes over values traced by an enclosing transformation, so it is "
               "traced anew on each call" if not entry.cacheable else
               "a trace with the same signature was made before and then dropped from the "
               "cache (clear_cache() or plax.clear_caches())")
        diffs = [(("uncached",), why)]
    if not every:
        seen = wrapped._state.function.explained_causes
        if all(cause in seen for cause, _ in diffs):
            return
        seen.update(cause for cause, _ in diffs)
    lines = [f"  * {text}" for _, text in diffs[:_MAX_LINES]]
    if len(diffs) > _MAX_LINES:
        lines.append(f"  * ... and {len(diffs) - _MAX_LINES} more differences")
    if not every:
        lines.append(f"  ({name} has been retraced more than {RETRACES_BEFORE_EXPLAINING} times, "
                     "so its retraces are explained, each cause once. "
                     "plax.config.update('jax_explain_cache_misses', False) turns this off, "
                     "True explains every trace.)")
    logger.warning("%s is traced again (trace %d of it); compared with its closest earlier "
                   "trace:\n%s", head, n, "\n".join(lines))


def _code_of(fun):
    """The code object of the Python function behind ``fun`` (``functools.wraps`` wrappers,
    partials, methods and callable objects followed), or None."""
    for _ in range(8):
        try:
            fun = inspect.unwrap(fun)
        except ValueError:  # a __wrapped__ cycle
            pass
        code = getattr(fun, "__code__", None)
        if code is not None:
            return code
        nxt = getattr(fun, "__wrapped__", None) or getattr(fun, "func", None) \
            or getattr(fun, "__func__", None)
        if nxt is None:
            call = getattr(type(fun), "__call__", None)
            nxt = call if call is not None and hasattr(call, "__code__") else None
        if nxt is None:
            return None
        fun = nxt
    return None


def _earlier_keys(wrapped, key) -> list:
    keys = list(wrapped._state.function.traces)[-_MAX_CANDIDATES:]
    last = wrapped._state.function.last_key
    if last is not None and last not in keys:  # its entry could not be cached
        keys.append(last)
    return keys


def _closest_differences(earlier, key, namer) -> list:
    best = None
    for old in reversed(earlier):  # most recent first: it wins ties
        diffs = _differences(old, key, namer)
        if best is None or len(diffs) < len(best):
            best = diffs
            if not diffs:
                break
    return best


# --- naming arguments -------------------------------------------------------------------
class _Namer:
    """Python names of the dynamic arguments: ``x``, ``params['w1']``, ``args[1]``."""

    def __init__(self, fun, key, entry):
        try:
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):
            params = []
        self.positional = [p.name for p in params
                           if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.var_pos = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
        static_pos = {k for kind, k, _ in key[2] if kind == "pos"}
        n_dyn = len(key[0].children()[0].children()) if key[0].children() else 0
        self.dyn_to_pos, i = [], 0
        while len(self.dyn_to_pos) < n_dyn:
            if i not in static_pos:
                self.dyn_to_pos.append(i)
            i += 1
        names = entry.arg_names
        self.leaf_names = names if names and len(names) == len(key[1]) else None

    def positional_name(self, i: int) -> str:
        if i < len(self.positional):
            return self.positional[i]
        j = i - len(self.positional)
        return f"{self.var_pos}[{j}]" if self.var_pos else f"args[{i}]"

    def path(self, path: tuple) -> str:
        """The name of the node at ``path`` (steps below the ``(args, kwargs)`` root)."""
        if len(path) < 2:
            return "the positional arguments" if path == ((0, "[0]"),) else "the keyword arguments"
        (top, _), (sub, _) = path[0], path[1]
        rest = "".join(text for _, text in path[2:])
        if top == 0:
            pos = self.dyn_to_pos[sub] if sub < len(self.dyn_to_pos) else sub
            return self.positional_name(pos) + rest
        return str(sub) + rest

    def leaf(self, i: int, paths) -> str:
        return self.leaf_names[i] if self.leaf_names else self.path(paths[i])


# --- comparing two keys -----------------------------------------------------------------
def _differences(old, new, namer) -> list:
    """``[(cause, text)]``: how key ``new`` differs from ``old``; ``cause`` identifies the kind
    of change and the argument, for reporting each cause once."""
    diffs = []
    old_tree, new_tree = old[0], new[0]
    if old_tree == new_tree:
        paths = None
        for i, (a, b) in enumerate(zip(old[1], new[1])):
            if a != b:
                if paths is None and namer.leaf_names is None:
                    paths = _leaf_paths(new_tree)
                diffs += _aval_difference(namer.leaf(i, paths), a, b)
    else:
        _tree_differences(old_tree, new_tree, (), namer, diffs)
        old_avals = dict(zip(_leaf_paths(old_tree), old[1]))
        for path, b in zip(_leaf_paths(new_tree), new[1]):
            a = old_avals.get(path)
            if a is not None and a != b:
                diffs += _aval_difference(namer.path(path), a, b)
    diffs += _static_differences(old[2], new[2], namer)
    for flag, a, b in zip(TRACE_FLAGS, old[3], new[3]):
        if a != b:
            diffs.append((("flag", flag), f"the trace-context flag jax_{flag} changed: "
                                          f"{a!r} -> {b!r}"))
    if old[4] != new[4]:
        diffs.append((("axis_env",), "the named axes in scope changed: "
                                     f"{_axes_text(old[4])} -> {_axes_text(new[4])}"))
    if old[5] != new[5]:
        diffs.append((("mesh",), f"the context mesh changed: {old[5]!r} -> {new[5]!r}"))
    return diffs


def _type_text(aval) -> str:
    return ("~" if aval.weak_type else "") + aval.str_short()


def _aval_difference(name, a, b) -> list:
    if not (hasattr(a, "shape") and hasattr(b, "shape")):
        return [(("type", name), f"{name}: type changed: {a} -> {b}")]
    aspects = []
    if a.shape != b.shape:
        aspects.append("shape")
    if a.dtype != b.dtype:
        aspects.append("dtype")
    if a.weak_type != b.weak_type:
        aspects.append("weak_type")
    if getattr(a, "_sharding", None) != getattr(b, "_sharding", None):
        aspects.append("sharding")
    if getattr(a, "manual_axis_type", None) != getattr(b, "manual_axis_type", None):
        aspects.append("varying manual axes")
    if not aspects:  # another kind of abstract value
        aspects.append("type")
    text = f"{name}: {' and '.join(aspects)} changed: {_type_text(a)} -> {_type_text(b)}"
    if "weak_type" in aspects:
        text += (" (~ marks a weak type: a Python int/float/complex scalar was passed where "
                 "an array was before, or the reverse; pass the same kind each call to reuse "
                 "the trace)")
    return [((aspects[0], name), text)]


def _static_differences(old, new, namer) -> list:
    def by_name(static_key):
        return {(namer.positional_name(k) if kind == "pos" else k): v
                for kind, k, v in static_key}
    a, b = by_name(old), by_name(new)
    diffs = []
    for name in [n for n in b if n not in a] + [n for n in a if n not in b]:
        now = "passed now, not before" if name in b else "passed before, not now"
        diffs.append((("static", name), f"{name} (static): {now}"))
    for name in b:
        if name in a and not _same_static(a[name], b[name]):
            ra, rb = _short_repr(a[name]), _short_repr(b[name])
            text = f"{name} (static): value changed: {ra} -> {rb}"
            if ra == rb:
                text += (" (the two print alike but compare unequal: static arguments are "
                         "compared with == and hash, so give the type value-based __eq__ and "
                         "__hash__)")
            text += ("; each new static value means a new trace, so a static argument that "
                     "changes on every call retraces on every call (pass it as an array "
                     "instead if it varies)")
            diffs.append((("static", name), text))
    return diffs


def _same_static(a, b) -> bool:
    try:
        return bool(type(a) is type(b) and a == b)
    except Exception:  # an __eq__ that raises or returns an array
        return False


def _short_repr(value, limit: int = 60) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__} object>"
    return text if len(text) <= limit else text[:limit] + "..."


def _axes_text(axis_env) -> str:
    return "{" + ", ".join(f"{n}: {s}" for n, s in axis_env) + "}" if axis_env else "none"


# --- pytree structures ------------------------------------------------------------------
def _steps(treedef) -> list:
    """``[(key, text)]`` for the children of a non-leaf treedef node (``text`` as keystr)."""
    kind, aux = treedef.node_data()
    n = len(treedef.children())
    keys = None
    if isinstance(kind, type) and issubclass(kind, collections.defaultdict):
        keys = list(aux[1])  # (default_factory, keys)
    elif isinstance(kind, type) and issubclass(kind, dict):
        keys = list(aux)
    if keys is not None and len(keys) == n:
        return [(k, f"[{k!r}]") for k in keys]
    fields = getattr(kind, "_fields", None)  # namedtuple
    if fields is not None and len(fields) == n:
        return [(f, f".{f}") for f in fields]
    if kind not in (tuple, list, type(None)):  # a registered type: ask it for its keys
        try:
            node = tree_util.tree_unflatten(treedef, [None] * treedef.num_leaves)
            pairs, _ = tree_util.flatten_one_level_with_keys(node)
            if len(pairs) == n:
                return [(str(k), str(k)) for k, _ in pairs]
        except Exception:  # an unflatten that checks its children: index them instead
            pass
    return [(i, f"[{i}]") for i in range(n)]


def _leaf_paths(treedef) -> list:
    """The path of each leaf, in flattening order: tuples of ``(key, text)`` steps."""
    out = []

    def walk(node, path):
        if node.node_data() is None:
            out.append(path)
            return
        for step, child in zip(_steps(node), node.children()):
            walk(child, path + (step,))
    walk(treedef, ())
    return out


def _kind_text(treedef) -> str:
    data = treedef.node_data()
    if data is None:
        return "an array leaf"
    return "None" if data[0] is type(None) else f"a {data[0].__name__}"


def _tree_differences(old, new, path, namer, diffs) -> None:
    """Append a difference for each container that differs between treedefs ``old`` and
    ``new`` (the outermost ones: below a changed container only common children are
    compared)."""
    old_data, new_data = old.node_data(), new.node_data()
    if old_data is None and new_data is None:
        return
    where = namer.path(path) if path else "the arguments"
    top = len(path) < 2  # the arguments, or the tuple of positional / dict of keyword ones

    def report(detail):
        text = f"pytree structure changed: {where} {detail}" if top else \
            f"{where}: pytree structure changed: {detail}"
        diffs.append((("structure", where), text))

    if old_data is None or new_data is None or old_data[0] is not new_data[0]:
        return report(f"{'were' if top else 'was'} {_kind_text(old)}, now {_kind_text(new)}")
    kind = new_data[0].__name__
    old_steps, new_steps = _steps(old), _steps(new)
    old_keys, new_keys = [k for k, _ in old_steps], [k for k, _ in new_steps]
    pairs = list(zip(new_steps, old.children(), new.children()))
    if path == ((0, "[0]"),):  # the tuple of positional arguments
        if len(old_keys) != len(new_keys):
            report(f"changed in number: {len(old_keys)} -> {len(new_keys)}")
    elif new_keys != list(range(len(new_keys))) or old_keys != list(range(len(old_keys))):
        gained = [k for k in new_keys if k not in old_keys]
        lost = [k for k in old_keys if k not in new_keys]
        parts = [f"gained key{'s' * (len(ks) > 1)} {', '.join(repr(k) for k in ks)}"
                 if ks is gained else
                 f"lost key{'s' * (len(ks) > 1)} {', '.join(repr(k) for k in ks)}"
                 for ks in (gained, lost) if ks]
        if parts:
            report(" and ".join(parts) if top else f"the {kind} {' and '.join(parts)}")
        elif old_keys != new_keys:
            report(f"the {kind}'s key order changed")
        old_by_key = dict(zip(old_keys, old.children()))
        pairs = [(step, old_by_key[step[0]], child)
                 for step, child in zip(new_steps, new.children()) if step[0] in old_by_key]
    elif len(old_keys) != len(new_keys):
        report(f"the {kind} changed length: {len(old_keys)} -> {len(new_keys)}")
    elif old_data[1] != new_data[1]:
        report(f"the {kind} node's data changed: {_short_repr(old_data[1])} -> "
               f"{_short_repr(new_data[1])}")
    for step, a, b in pairs:
        _tree_differences(a, b, path + (step,), namer, diffs)
