"""Errors a user meets when a traced value is used where a concrete one is needed.

The class names and the opening phrase of each message match JAX's, so that
searches for them find answers; the explanations are plax's own.
"""
from __future__ import annotations


ERRORS_PAGE = "https://docs.jax.dev/en/latest/errors.html"


class _Documented:
    """An error whose message ends with a pointer to its entry on JAX's errors page (whose
    explanations fit plax, which keeps JAX's API), as JAX's own messages do."""

    def __init__(self, message=""):
        super().__init__(f"{message}\nSee {ERRORS_PAGE}#jax.errors.{type(self).__name__}")


class JAXTypeError(_Documented, TypeError):
    pass


def _origin(tracer) -> str:
    info = getattr(tracer, "_debug_origin", None)
    try:
        return info() if callable(info) else ""
    except Exception:  # a library's tracer without a trace
        return ""


def _shown_aval(tracer) -> str:
    """The short type of ``tracer`` (``f32[3]``) for a message, ``aval None`` for a library's
    tracer that has none."""
    try:
        aval = tracer.aval
    except Exception:
        aval = None
    return aval.str_short() if hasattr(aval, "str_short") else f"aval {aval!r}"


def _shape(tracer):
    try:
        return tracer.shape
    except Exception:
        return "?"


class ConcretizationTypeError(JAXTypeError):
    """A traced value was used where Python needs a concrete value."""

    def __init__(self, tracer, context: str = ""):
        self.tracer = tracer
        shown = _shown_aval(tracer)
        msg = (f"Abstract tracer value encountered where concrete value is expected: "
               f"a traced {shown} value.\n")
        if context:
            msg += context + "\n"
        origin = _origin(tracer)
        if origin:
            msg += origin + "\n"
        msg += ("Values that depend on the arguments of a transformed function are only known "
                "symbolically while it is traced. If the value is a shape or a flag, mark the "
                "argument static (static_argnums/static_argnames), or compute it with NumPy "
                "instead of plax.numpy.")
        super().__init__(msg)


class TracerBoolConversionError(ConcretizationTypeError):
    """``bool(tracer)``, e.g. in an ``if`` or ``while`` on a traced value."""

    def __init__(self, tracer):
        super().__init__(tracer, "Attempted boolean conversion of traced array with shape "
                         f"{_shape(tracer)}. Python control flow on a traced "
                         "value cannot be traced: use plax.lax.cond / plax.numpy.where, or "
                         "make the argument static.")


class TracerIntegerConversionError(JAXTypeError):
    """``int(tracer)`` or ``tracer.__index__()``, e.g. as a list index."""

    def __init__(self, tracer):
        shown = _shown_aval(tracer)
        origin = _origin(tracer)
        super().__init__(
            f"The __index__() method was called on traced array with shape "
            f"{_shape(tracer)} ({shown}).\n"
            + (origin + "\n" if origin else "")
            + "A traced value cannot be used as a Python integer, for example to index a "
              "Python list or as a size. Use plax.numpy indexing on an array instead, or "
              "make the argument static.")


class TracerArrayConversionError(JAXTypeError):
    """``np.asarray(tracer)``: a traced value cannot become a NumPy array."""

    def __init__(self, tracer):
        shown = _shown_aval(tracer)
        origin = _origin(tracer)
        super().__init__(
            f"The numpy.ndarray conversion method __array__() was called on traced array "
            f"with shape {_shape(tracer)} ({shown}).\n"
            + (origin + "\n" if origin else "")
            + "NumPy functions cannot run on traced values: use the plax.numpy function of "
              "the same name instead.")


SHAPE_PHRASE = "Shapes must be 1D sequences of concrete values of integer type"


def shape_type_error(shape, name: str = "shape") -> TypeError:
    """The error for a shape argument that is not a sequence of concrete integers.

    The opening phrase is JAX's; a traced entry (e.g. ``jnp.zeros(n)`` with ``n`` an
    argument of a jitted function) gets the advice to make it static.
    """
    from plax.core.trace import Tracer
    entries = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
    shown = ", ".join(_entry_text(d) for d in entries)
    shown = f"({shown},)" if len(entries) == 1 else f"({shown})"
    msg = f"{SHAPE_PHRASE}, got {name}={shown}."
    traced = [d for d in entries if isinstance(d, Tracer)]
    if traced:
        msg += ("\nA traced value sets an array size here, but sizes must be known while "
                "tracing. Mark the argument it comes from static (static_argnums / "
                "static_argnames), or compute the size with NumPy or Python ints.")
        origin = _origin(traced[0])
        if origin:
            msg += "\n" + origin
    return TypeError(msg)


def _entry_text(d) -> str:
    aval = getattr(d, "aval", None)
    if hasattr(aval, "str_short"):
        return f"traced {aval.str_short()}"
    return repr(d)


class JAXIndexError(_Documented, IndexError):
    """Base of plax's indexing errors (JAX's name, so ``except`` clauses carry over)."""


class NonConcreteBooleanIndexError(JAXIndexError):
    """A boolean mask index that is only traced: the result's shape would depend on values."""

    def __init__(self, tracer):
        shown = _shown_aval(tracer)
        super().__init__(
            f"Array boolean indices must be concrete; got {shown}. The number of selected "
            "elements (and so the result's shape) would depend on traced values. Use "
            "plax.numpy.where(mask, x, fill) to keep the shape, or pass size= to "
            "plax.numpy.nonzero and index with the result.")


class UnexpectedTracerError(_Documented, Exception):
    """A tracer escaped the transformation that made it and was used afterwards."""


class KeyReuseError(JAXTypeError):
    """A consumed PRNG key was used again (with ``jax_debug_key_reuse`` on)."""


class InconclusiveDimensionOperation(Exception):
    """A comparison or operation on symbolic dimensions (shape polymorphism) whose result
    depends on the values of the dimension variables."""


# Exceptions raised inside host callbacks, oldest first. XLA reports a failed callback as
# a bare "CpuCallback error"; the runtime takes the callback's own exception from here
# and raises it instead (chained to XLA's error).
_callback_failures: list = []


def record_callback_failure(exc: BaseException) -> None:
    _callback_failures.append(exc)
    del _callback_failures[:-64]  # failures nobody asked about are not kept forever


def take_callback_failure(reported: str = ""):
    """The recorded callback exception XLA's error text ``reported`` names (removed), or
    else the oldest one, or None. (A callback called outside XLA, e.g. a TPU program's host
    callback called by hand, leaves a failure that no XLA error names.)"""
    for i in reversed(range(len(_callback_failures))):
        first_line = str(_callback_failures[i]).split("\n", 1)[0]
        if first_line and first_line in reported:
            return _callback_failures.pop(i)
    return _callback_failures.pop(0) if _callback_failures else None
