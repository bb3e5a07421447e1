"""jit's options, checked and resolved against the wrapped function's signature, and the
caches every ``jit(f)`` of one function shares (api/jit.py's JitWrapped uses them)."""
from __future__ import annotations

import inspect
import weakref

from plax import tree_util
from plax.api.devices import resolve_device
from plax.runtime import jitted, xla
from plax.sharding import NamedSharding, PartitionSpec, Sharding
from plax.sharding.named import resolve_spec


class _Unspecified:
    def __repr__(self):
        return "UNSPECIFIED"


UNSPECIFIED = _Unspecified()


def _as_tuple(x) -> tuple:
    if x is None:
        return ()
    if isinstance(x, (int, str)):
        return (x,)
    return tuple(x)


def _resolve_argnums_and_names(fun, argnums, argnames, what: str):
    """Fill in whichever of argnums/argnames is missing from the signature, as JAX does."""
    argnums, argnames = _as_tuple(argnums), _as_tuple(argnames)
    if not argnums and not argnames:  # nothing to fill in or check: no signature needed
        return argnums, argnames
    for i in argnums:
        if not isinstance(i, int):
            raise TypeError(f"{what}_argnums must be integers, got {i!r}.")
    for n in argnames:
        if not isinstance(n, str):
            raise TypeError(f"{what}_argnames must be strings, got {n!r}.")
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return argnums, argnames
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if argnums and not argnames:
        argnames = tuple(positional[i].name for i in argnums
                         if -len(positional) <= i < len(positional)
                         and positional[i].kind == positional[i].POSITIONAL_OR_KEYWORD)
    elif argnames and not argnums:
        argnums = tuple(i for i, p in enumerate(positional)
                        if p.name in argnames and p.kind == p.POSITIONAL_OR_KEYWORD)
    has_varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    has_varkw = any(p.kind == p.VAR_KEYWORD for p in params)
    if not has_varargs:
        for i in argnums:
            if not -len(positional) <= i < len(positional):
                raise ValueError(f"jitted function has {what}_argnums={argnums} but only accepts "
                                 f"{len(positional)} positional arguments.")
    if not has_varkw:
        invalid = [n for n in argnames if n not in {p.name for p in named}]
        if invalid:
            raise ValueError(f"Jitted function has invalid argnames {set(invalid)} in "
                             f"{what}_argnames: {', '.join(map(repr, invalid))} "
                             f"{'is not a parameter' if len(invalid) == 1 else 'are not parameters'}"
                             f" of the function (its parameters: {[p.name for p in named]}).")
    return argnums, argnames


class _FunctionTraces:
    """What every ``jit(f)`` of one ``f`` shares, as in JAX (whose caches are keyed on the
    function, held weakly): its traces by call signature, whatever the jit options, and what
    explain_cache_misses counts. It holds no reference to ``f``, so it goes when ``f`` does."""

    __slots__ = ("traces", "by_options", "n_traces", "explained_causes", "last_key")

    def __init__(self):
        self.traces: dict = {}  # signature key -> _JitEntry (its params: the first options')
        self.by_options: dict = {}  # options key -> _JitState
        self.n_traces = 0  # traces so far, and causes already logged
        self.explained_causes: set = set()
        self.last_key = None

    def clear(self) -> None:
        self.traces.clear()
        for state in self.by_options.values():
            state.clear()


class _JitState:
    """What every ``jit(f, **options)`` with the same ``f`` and options shares: the options
    resolved against ``f``'s signature, the cache entries (a trace with these options'
    parameters) and the executables picked per eager signature. The C++ cache files its
    signatures under (``f``, this state)."""

    __slots__ = ("resolved", "function", "entries", "fast", "shared", "__weakref__")

    def __init__(self, resolved, function: _FunctionTraces, shared: bool):
        self.resolved, self.function, self.shared = resolved, function, shared
        self.entries: dict = {}
        # Signature -> (executable, entry, committed, single output?, constants) for the
        # Python eager path, which applies when no argument is static (those need the
        # general path's hashing and splitting); C++ misses go through it too.
        self.fast: dict = {}

    def clear(self) -> None:
        self.entries.clear()
        self.fast.clear()


# function -> its _FunctionTraces; every _JitState, for clear_caches().
traces_by_function: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
live_jit_states: weakref.WeakSet = weakref.WeakSet()


def _options_key(options: dict):
    """The jit options as a hashable key (shardings flattened), or None if some option is
    unhashable (such a jit gets caches of its own)."""
    parts = []
    for name, value in options.items():
        if name.endswith("_shardings") and value is not UNSPECIFIED and value is not None:
            leaves, tree = tree_util.tree_flatten(value, is_leaf=_is_sharding_leaf)
            value = (tree, tuple(leaves))
        elif isinstance(value, (list, dict)):
            value = (type(value), tuple(value.items() if isinstance(value, dict) else value))
        parts.append(value)
    key = tuple(parts)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def shared_jit_state(fun, options: dict) -> _JitState:
    """The state ``jit(fun, **options)`` shares with earlier jits of ``fun`` (made on first
    use; unshared when ``fun`` cannot be held weakly or hashed, or an option is unhashable)."""
    key = _options_key(options)
    function = None
    if key is not None:
        try:
            function = traces_by_function.get(fun)
            if function is None:
                function = traces_by_function[fun] = _FunctionTraces()
                # Its states refer back to it: when ``fun`` goes, let them go by reference
                # counting alone (with the consts their traces hold), as JAX's do.
                weakref.finalize(fun, function.by_options.clear)
        except Exception:  # (fun is not weakly referenceable, hashable or comparable)
            key = None
    if function is None:  # caches of its own, unseen by any other jit
        function = _FunctionTraces()
    state = function.by_options.get(key) if key is not None else None
    if state is None:
        state = _JitState(_resolve_jit_options(fun, **options), function,
                          shared=key is not None)
        if key is not None:  # (an unshared state is its function's only one: no entry)
            function.by_options[key] = state
        live_jit_states.add(state)
    return state


def _resolve_jit_options(fun, *, in_shardings, out_shardings, static_argnums, static_argnames,
                         donate_argnums, donate_argnames, keep_unused, device, backend, inline,
                         compiler_options, eager_only):
    """jit's options checked and resolved against ``fun``'s signature (a dict of the
    JitWrapped attributes they become)."""
    static_argnums, static_argnames = _resolve_argnums_and_names(
        fun, static_argnums, static_argnames, "static")
    donate_argnums, donate_argnames = _resolve_argnums_and_names(
        fun, donate_argnums, donate_argnames, "donate")
    overlap = set(static_argnums) & set(donate_argnums)
    if overlap:
        raise ValueError(f"static_argnums and donate_argnums cannot overlap: {sorted(overlap)}.")
    # Multi-device (or PartitionSpec) shardings: the computation is SPMD over a mesh.
    in_spmd, out_spmd = _spmd_shardings(in_shardings), _spmd_shardings(out_shardings)
    specs = [s for s in tree_util.tree_leaves((in_spmd, out_spmd), is_leaf=_is_sharding_leaf)
             if isinstance(s, PartitionSpec)]
    return dict(
        _static_argnums=static_argnums, _static_argnames=static_argnames,
        _donate_argnums=donate_argnums, _donate_argnames=donate_argnames,
        _keep_unused=bool(keep_unused), _eager_only=eager_only, _inline=bool(inline),
        _device=_jit_device(device, backend, in_shardings, out_shardings),
        _in_shardings=in_spmd, _out_shardings=out_spmd,
        _compiler_options=jitted.compiler_options_key(compiler_options),
        _fast_ok=not (static_argnums or static_argnames),
        _shardings_given=in_spmd is not None or out_spmd is not None,
        # jaxlib's C++ dispatch, for plain eager calls; not where PartitionSpecs must be
        # resolved against the context mesh on each call.
        _use_cpp=not specs and min(static_argnums, default=0) >= 0)


def _is_sharding_leaf(x) -> bool:
    return x is None or isinstance(x, (Sharding, PartitionSpec))


def _spmd_shardings(shardings):
    """``shardings`` (a pytree prefix) when it asks for SPMD (a PartitionSpec, a mesh's
    NamedSharding, or a sharding over several devices), else None: other single-device
    shardings just pin the device."""
    if shardings is UNSPECIFIED or shardings is None:
        return None
    leaves = tree_util.tree_leaves(shardings, is_leaf=_is_sharding_leaf)
    if any(isinstance(s, (PartitionSpec, NamedSharding)) or
           (isinstance(s, Sharding) and s.num_devices > 1) for s in leaves):
        return shardings
    return None


def broadcast_shardings(prefix, tree, what: str, name: str) -> list:
    """One sharding per leaf of ``tree`` (the arguments, or the outputs' treedef) from the
    prefix ``prefix`` (PartitionSpecs resolved against the context mesh)."""
    whole = "the arguments" if what == "in_shardings" else "the outputs"
    if isinstance(tree, tree_util.PyTreeDef):
        broadcast, tree_size = tree_util.broadcast_prefix_to_treedef, tree.num_leaves
    else:
        broadcast, tree_size = tree_util.broadcast_prefix, len(tree_util.tree_leaves(tree))
    if _is_sharding_leaf(prefix):
        flat = [prefix] * tree_size
    else:
        try:
            flat = broadcast(prefix, tree, _is_sharding_leaf, name=what, which=whole)
        except ValueError as e:
            raise ValueError(f"jit {what} of {name} must be a pytree prefix of {whole}: {e}") \
                from None
    out = []
    for s in flat:
        out.append(resolve_spec(s, f"jit {what} of {name}") if isinstance(s, PartitionSpec)
                   else s)
    return out


def _jit_device(device, backend, in_shardings, out_shardings):
    """The single device a jitted function is pinned to, from device/backend/shardings."""
    chosen = None
    if device is not None:
        chosen = resolve_device(device)
    if backend is not None:
        bdev = xla.get_backend(backend).local_devices()[0]
        if chosen is not None and chosen.platform != bdev.platform:
            raise ValueError(f"jit got device={chosen} and backend={backend!r}, which disagree.")
        chosen = chosen or bdev
    for what, shardings in (("in_shardings", in_shardings), ("out_shardings", out_shardings)):
        if shardings is UNSPECIFIED or shardings is None:
            continue
        leaves = tree_util.tree_leaves(shardings, is_leaf=_is_sharding_leaf)
        for s in leaves:
            if s is not None and not isinstance(s, (Sharding, PartitionSpec)):
                raise TypeError(f"jit {what} must be Sharding objects or PartitionSpecs, got "
                                f"{type(s).__name__}.")
        if _spmd_shardings(shardings) is not None:
            continue  # an SPMD computation: its devices are the mesh's
        for s in leaves:
            if s is None:
                continue
            d = next(iter(s.device_set))
            if chosen is not None and d != chosen:
                raise ValueError(f"jit {what} put data on {d} but the computation runs on "
                                 f"{chosen}; a jitted function runs on one device.")
            chosen = d
    return chosen
