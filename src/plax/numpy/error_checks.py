"""Errors recorded while a program runs and raised afterwards (JAX's ``error_check``).

``set_error_if(pred, msg)`` may be called anywhere, eagerly or inside ``jit``, ``grad``,
``vmap``, ``scan``, ``cond``, ...: it records ``msg`` (and where it was called) in a process
list at trace time and, when the program runs, stores that entry's index in this thread's
error state if ``pred`` holds anywhere and no earlier error is stored. ``raise_if_error()``,
called outside traced code, raises the stored error as a ``JaxValueError`` and clears it.

The state is a ``plax.ref`` reference holding a uint32 code (``NO_ERROR`` when clear): the
traced functions that write it close over it, and plax's reference discharge carries it in
and out of their programs. With a mesh in the context, ``error_checking_context()`` makes
it an array with one code per device (shaped as the mesh, split over every axis), so that a
sharded predicate is reduced on each device without communication.

plax.numpy's functions call the category checks below (NaN produced, division by zero,
gather indices out of bounds) when the ``jax_error_checking_behavior_*`` flags say
``raise``; those flags are part of every jit's cache key.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import traceback as traceback_lib
import warnings

import numpy as np

from plax import lax
from plax.api.jit import eval_context
from plax.core import dtypes
from plax.core.avals import ShapedArray
from plax.core.config import config
from plax.core.primitive import Primitive
from plax.core.rules import abstract_eval_rules, batch_rules, not_mapped, register_lowering
from plax.core.sharding_types import sharding_rules
from plax.core.tracebacks import filter_traceback
from plax.core.trace import EvalTrace, current_trace, get_aval
from plax.core.tree_core import register_dataclass
from plax.first_order.ad_util import defzero
from plax.lowering.inline import lower_fun
from plax.runtime import xla
from plax.sharding import mesh as mesh_lib
from plax.sharding.mesh import AxisType

__all__ = ["JaxValueError", "set_error_if", "raise_if_error", "error_checking_context",
           "wrap_for_export", "unwrap_from_import", "error_checking_behavior",
           "set_error_if_nan", "set_error_if_divide_by_zero", "set_error_if_with_category",
           "check_gather_in_bounds", "check_precondition_oob_gather"]

# The code of "no error": the largest uint32, so the minimum over codes is the first error.
NO_ERROR = np.uint32(np.iinfo(np.uint32).max)

_CORRUPT = ("An unknown error occurred during execution of an AOT-imported function. This may "
            "indicate data corruption during AOT serialization/deserialization, or a version "
            "mismatch between the exporting and importing versions.")


class JaxValueError(ValueError):
    """An error detected while a computation ran (raised by ``raise_if_error``)."""


# Every error set_error_if has traced: (message, traceback), indexed by code. The traceback
# is a Python traceback of the call site, or its text for errors of an imported program.
_errors_lock = threading.RLock()
_errors: list = []


class _State(threading.local):
    def __init__(self):
        self.ref = None  # this thread's error code reference, made on first use


_state = _State()


def _no_error_value(mesh):
    """The cleared error state for ``mesh``: a scalar, or one code per device of ``mesh``."""
    if mesh is None:
        return NO_ERROR
    from plax.sharding.named import NamedSharding
    from plax.sharding.partition_spec import PartitionSpec
    return lax.full(mesh.axis_sizes, NO_ERROR,
                    sharding=NamedSharding(mesh, PartitionSpec(*mesh.axis_names)))


def _context_mesh():
    mesh = mesh_lib.context_mesh()
    return mesh if isinstance(mesh, mesh_lib.Mesh) and mesh.axis_names else None


def _new_state():
    """A fresh error state reference laid out for the context mesh."""
    from plax.ref import new_ref
    return new_ref(_no_error_value(_context_mesh()))


def _global_state():
    if _state.ref is None:
        with eval_context():
            _state.ref = _new_state()
    return _state.ref


class error_checking_context:
    """Within: a fresh error state laid out for the context mesh (one code per device);
    the previous state comes back on exit. Enter it after setting a mesh."""

    __slots__ = ("saved",)

    def __init__(self):
        self.saved = None

    def __enter__(self):
        self.saved = _state.ref
        with eval_context():
            _state.ref = _new_state()
        return self

    def __exit__(self, *exc):
        _state.ref = self.saved
        return False


def _call_site():
    """The Python traceback of the user code calling now, plax's frames left out (frames
    without their locals: nothing traced is kept alive)."""
    tb = xla.jaxlib_submodule("_jax").Traceback.get_traceback()
    return None if tb is None else filter_traceback(tb.as_python_traceback())


# Whether a predicate holds anywhere, the axes vmap added included: the error state is one
# for the whole batch, so under vmap the answer is one unbatched scalar.
any_anywhere_p = Primitive("any_anywhere")
abstract_eval_rules[any_anywhere_p] = lambda pred: ShapedArray((), np.dtype(np.bool_))
sharding_rules[any_anywhere_p] = lambda avals_in, avals_out: [None]
register_lowering(any_anywhere_p, lower_fun(
    lambda pred: lax.reduce_or(pred, tuple(range(np.ndim(pred))))))
batch_rules[any_anywhere_p] = lambda axis, vals, dims: (any_anywhere_p.bind(vals[0]),
                                                        not_mapped)
defzero(any_anywhere_p)


def _any_per_code(pred, ref):
    """``pred`` reduced to the shape of the codes ``ref`` holds: a scalar, or (per device)
    whether ``pred``'s block on that device holds anywhere."""
    codes = get_aval(ref[...])
    if not codes.shape:
        return any_anywhere_p.bind(pred)
    codes_sharding = codes.sharding if hasattr(codes, "sharding") else None
    state_mesh = codes_sharding.mesh if codes_sharding is not None else None
    pred_sharding = getattr(get_aval(pred), "sharding", None)
    pred_mesh = pred_sharding.mesh if pred_sharding is not None else mesh_lib.get_abstract_mesh()
    if AxisType.Auto in tuple(pred_mesh.axis_types):
        warnings.warn("When at least one mesh axis of `pred` is in auto mode, calling "
                      "`set_error_if` will cause implicit communication between devices. To "
                      "avoid this, consider converting the mesh axis in auto mode to explicit "
                      "mode.", RuntimeWarning, stacklevel=3)
        return lax.broadcast(any_anywhere_p.bind(pred), codes.shape)
    if state_mesh is None or not mesh_lib.same_mesh(pred_mesh, state_mesh):
        raise ValueError("The error code state and the predicate must be on the same mesh, "
                         f"but got {state_mesh} and {pred_mesh} respectively. Please use "
                         "`with error_checking_context()` to redefine the error code state "
                         "based on the mesh.")
    from plax.api.shard_map import shard_map
    from plax.sharding.partition_spec import PartitionSpec

    def per_device(block):
        return lax.reshape(lax.reduce_or(block, tuple(range(block.ndim))),
                           (1,) * len(codes.shape))
    in_spec = pred_sharding.spec if pred_sharding is not None else PartitionSpec()
    return shard_map(per_device, mesh=state_mesh, in_specs=in_spec,
                     out_specs=PartitionSpec(*state_mesh.axis_names))(pred)


def _as_predicate(pred):
    import plax.numpy as jnp
    pred = jnp.asarray(pred)
    return pred if pred.dtype == np.bool_ else pred != 0


def _record(ref, pred, code):
    """Store ``code`` (a number, or codes shaped as the state) where ``pred`` holds and no
    error is stored yet."""
    from plax.higher_order import ref_effects
    old = ref[...]
    clear = lax.eq(old, lax.full_like(old, NO_ERROR))
    if isinstance(code, (int, np.integer)):
        code = lax.full_like(old, code)
    # The new codes are unbatched (``any_anywhere_p``), as a carried reference's final value
    # is: a vmap around this accepts such a write (``written_back``) and refuses a batched one.
    ref_effects.write(ref, lax.select(lax.bitwise_and(clear, pred), code, old),
                      written_back=True)


def set_error_if(pred, /, msg: str) -> None:
    """Record ``msg`` as this thread's error if any element of ``pred`` is true (and no
    error is recorded yet); ``raise_if_error`` raises it later. Works inside transformed
    and staged code alike."""
    if not isinstance(msg, str):
        raise TypeError(f"set_error_if: msg must be a str, got {type(msg).__name__}.")
    ref = _global_state()
    pred = _as_predicate(pred)
    tb = _call_site()
    with _errors_lock:
        code = np.uint32(len(_errors))
        _errors.append((msg, tb))
    _record(ref, _any_per_code(pred, ref), code)


def _lookup(code):
    with _errors_lock:
        if 0 <= code < len(_errors):
            return _errors[code]
    return _CORRUPT, "Traceback not available for corrupted error codes."


def raise_if_error() -> None:
    """Raise the recorded error, if any, as a ``JaxValueError`` (and clear it). Call it
    outside traced code."""
    if not isinstance(current_trace(), EvalTrace):
        raise ValueError("raise_if_error() should not be called within a traced context, "
                         "such as within a jitted function.")
    ref = _state.ref
    if ref is None:
        return
    codes = ref[...]
    code = int(np.min(np.asarray(codes)))
    if code == NO_ERROR:
        return
    with eval_context():
        ref[...] = lax.full_like(codes, NO_ERROR, sharding=getattr(codes, "sharding", None))
    msg, tb = _lookup(code)
    if isinstance(tb, str):
        raise JaxValueError(f"{msg}\nThe original traceback is shown below:\n{tb}")
    raise JaxValueError(msg).with_traceback(tb)


# --- programs exported with their error checks -----------------------------------------------
@dataclasses.dataclass(frozen=True)
class _ErrorClass:
    """What an exported function's errors travel as: its final code and its own
    ``(message, traceback text)`` entries, which the code indexes."""
    error_code: object
    error_list: tuple


register_dataclass(_ErrorClass, data_fields=("error_code",), meta_fields=("error_list",))


def _entries_from_json(data: bytes) -> tuple:
    (entries,) = json.loads(data.decode("utf-8"))
    return (tuple((str(m), str(t)) for m, t in entries),)


def register_export_serialization(register) -> None:
    """Let ``_ErrorClass`` values be serialized with exported functions (``register``:
    plax.export's ``register_pytree_node_serialization``, which registers it on import)."""
    register(_ErrorClass, serialized_name="jax._src.error_check._ErrorClass",
             serialize_auxdata=lambda aux: json.dumps(aux, ensure_ascii=False).encode("utf-8"),
             deserialize_auxdata=_entries_from_json)


def _traceback_text(tb) -> str:
    return "".join(traceback_lib.format_list(traceback_lib.extract_tb(tb))).rstrip("\n")


def wrap_for_export(f):
    """``f`` with an error state of its own, returned beside its outputs as
    ``(out, errors)``, so that it can be exported; ``unwrap_from_import`` undoes this after
    ``deserialize``."""
    def inner(*args, **kwargs):
        global _errors
        from plax.ref import new_ref
        saved_ref = _state.ref
        _state.ref = new_ref(_no_error_value(_context_mesh()))
        with _errors_lock:
            saved_errors, _errors = _errors, []
            try:
                out = f(*args, **kwargs)
                code = lax.reduce_min(_state.ref[...], tuple(range(len(_state.ref.shape))))
            finally:
                _errors, own = saved_errors, _errors
                _state.ref = saved_ref
        entries = tuple((msg, tb if isinstance(tb, str) else _traceback_text(tb))
                        for msg, tb in own)
        return out, _ErrorClass(code, entries)
    return inner


def unwrap_from_import(f):
    """The inverse of ``wrap_for_export`` for an imported function: its errors join this
    thread's error state, to be raised by ``raise_if_error``."""
    _global_state()

    def inner(*args, **kwargs):
        out, errors = f(*args, **kwargs)
        new = errors.error_code
        with _errors_lock:
            offset = len(_errors)
            _errors.extend(tuple(e) for e in errors.error_list)
        ref = _global_state()
        new = lax.convert_element_type(new, np.uint32)
        failed = lax.ne(new, lax.full_like(new, NO_ERROR))
        shifted = lax.add(new, lax.full_like(new, np.uint32(offset)))
        shape = ref.shape
        _record(ref, lax.broadcast_in_dim(failed, shape, ()) if shape else failed,
                lax.broadcast_in_dim(shifted, shape, ()) if shape else shifted)
        return out
    return inner


# --- the checks plax.numpy's functions make, by category -------------------------------------
_BEHAVIOR_FLAGS = {"nan": "jax_error_checking_behavior_nan",
                   "divide": "jax_error_checking_behavior_divide",
                   "oob": "jax_error_checking_behavior_oob"}


class error_checking_behavior(contextlib.ContextDecorator):
    """Within: plax.numpy's checks of a category record errors (``"raise"``) or are off
    (``"ignore"``); ``all`` sets every category, and a category given too overrides it."""

    def __init__(self, *, all=None, nan=None, divide=None, oob=None):  # noqa: A002
        chosen = dict.fromkeys(_BEHAVIOR_FLAGS, all) if all is not None else {}
        chosen.update({k: v for k, v in (("nan", nan), ("divide", divide), ("oob", oob))
                       if v is not None})
        for value in chosen.values():
            if value not in ("ignore", "raise"):
                raise ValueError(f"error_checking_behavior: expected 'ignore' or 'raise', "
                                 f"got {value!r}.")
        self.chosen = chosen
        self.stack = None

    def __enter__(self):
        self.stack = contextlib.ExitStack()
        for category, value in self.chosen.items():
            self.stack.enter_context(config.override(_BEHAVIOR_FLAGS[category], value))
        return self

    def __exit__(self, *exc):
        self.stack.close()
        return False


def _raising(category: str) -> bool:
    return config.read(_BEHAVIOR_FLAGS[category]) == "raise"


def set_error_if_with_category(pred, /, msg: str, category=None) -> None:
    """``set_error_if(pred, msg)`` unless ``category``'s checks are off ("oob", or None for
    no category; NaN and division checks have their own functions)."""
    if category == "nan":
        raise ValueError("nan is deprecated. Use `_set_error_if_nan` instead.")
    if category == "divide":
        raise ValueError("divide is deprecated. Use `_set_error_if_divide_by_zero` instead.")
    if category not in (None, "oob"):
        raise ValueError(f"Invalid category: {category}")
    if category is None or _raising(category):
        set_error_if(pred, msg)


def set_error_if_nan(x, /) -> None:
    """Record "NaN encountered" if a real floating ``x`` holds a NaN (NaN checks on)."""
    if not _raising("nan"):
        return
    dt = get_aval(x).dtype
    if dtypes.is_inexact(dt) and not dtypes.is_complex(dt):
        set_error_if(lax.ne(x, x), "NaN encountered")


def set_error_if_divide_by_zero(y, /) -> None:
    """Record "Division by zero encountered" if the divisor ``y`` holds a zero (division
    checks on)."""
    if not _raising("divide"):
        return
    set_error_if(lax.eq(y, lax.full_like(y, 0)), "Division by zero encountered")


def check_gather_in_bounds(sizes, indices, negatives_wrap: bool = False) -> None:
    """Record "Out of bounds" if a gather's ``indices`` (last axis: one index per entry of
    ``sizes``, the sizes of the axes indexed) reach outside them (out-of-bounds checks on).
    ``negatives_wrap``: ``-size <= i < 0`` counts from the end (else negatives are out)."""
    if not _raising("oob") or not np.size(indices):
        return
    sizes = tuple(sizes)
    if np.shape(indices)[-1:] != (len(sizes),):
        raise ValueError(f"gather indices of shape {np.shape(indices)} do not hold one index "
                         f"per dimension of {sizes}.")
    import plax.numpy as jnp
    indices = jnp.asarray(indices)
    bound = jnp.asarray(sizes, dtype=indices.dtype)
    low = -bound if negatives_wrap else jnp.zeros_like(bound)
    set_error_if(jnp.logical_or(indices < low, indices >= bound),
                 "Out of bounds encountered before calling `lax.gather`")


def check_precondition_oob_gather(shape, gather_indices) -> None:
    """JAX's form: ``gather_indices`` (last axis: one index per dimension of ``shape``,
    negatives counting from the end) checked against ``shape``."""
    check_gather_in_bounds(shape, gather_indices, negatives_wrap=True)
