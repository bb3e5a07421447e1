"""Colocated Python classes: the real object made at the first method call, methods run as
colocated calls."""
from __future__ import annotations

import functools
import threading

from plax.experimental.colocated_python.func import make_callable


def wrap_class(cls):
    """A class whose instances hold ``cls``'s constructor arguments, make the real object on
    the first method call (on the host of that call's devices: here), and run its methods as
    colocated Python callables."""

    class WrappedClass:
        def __init__(self, *init_args, **init_kwargs):
            self._init = (init_args, init_kwargs)
            self._object = None
            self._lock = threading.Lock()

        def _real(self):
            with self._lock:
                if self._object is None:
                    self._object = cls(*self._init[0], **self._init[1])
                return self._object

        def __getattr__(self, name):
            if name.startswith("__") or not callable(getattr(cls, name, None)):
                raise AttributeError(f"{cls.__name__} colocated object has no method {name!r}")

            def method(*args, **kwargs):
                return getattr(self._real(), name)(*args, **kwargs)
            return make_callable(functools.wraps(getattr(cls, name))(method))

    WrappedClass.__name__ = WrappedClass.__qualname__ = cls.__name__
    WrappedClass.__doc__ = cls.__doc__
    return WrappedClass
