"""What a host callback's exception becomes once XLA has reported it (or, eagerly, at once):
JAX's ``JaxRuntimeError``, as JAX raises it."""
from __future__ import annotations

from plax.core.errors import take_callback_failure

# (runtime/xla.py, which defines JaxRuntimeError, imports this module: it is read at call time)


def raise_callback_failure(error) -> None:
    """If ``error`` (XLA's) comes from a host callback that raised, raise ``callback_error``
    of what it raised; otherwise return (the caller re-raises ``error``)."""
    from plax.runtime.xla import JaxRuntimeError
    if "allback error" not in str(error):
        return
    failure = take_callback_failure(str(error))
    if isinstance(failure, JaxRuntimeError) or not isinstance(failure, (Exception, type(None))):
        raise failure  # plax's own check of the results, or an interrupt
    if failure is not None:
        raise callback_error(failure) from failure


_callback_error_types: dict = {}


def callback_error(failure: Exception) -> Exception:
    """What a host callback's exception becomes: a JaxRuntimeError, as JAX raises (eagerly
    and under jit), that is also of the callback's own exception type where Python allows,
    so ``except ValueError`` catches a callback's ValueError too. Raise it ``from failure``."""
    from plax.runtime.xla import JaxRuntimeError
    message = (f"CpuCallback error calling callback: {type(failure).__name__}: {failure} "
               "(the host callback raised; its exception is the cause below)")
    cls = type(failure)
    try:
        both = _callback_error_types.get(cls)
        if both is None:
            both = _callback_error_types[cls] = type(
                "JaxRuntimeError", (JaxRuntimeError, cls),
                {"__module__": "plax.errors", "__str__": lambda self: self.args[0]})
        return both(message)
    except TypeError:  # a type that cannot be combined, or built from one message
        return JaxRuntimeError(message)
