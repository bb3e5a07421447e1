"""The ``jax`` modules jaxlib's C++ code imports, answered by plax while xla.py calls it."""
from __future__ import annotations

import os
import sys
import threading
import types


class _AnswerJaxlibLookups:
    """While open, the ``jax`` modules jaxlib's C++ code imports are plax's stand-ins.

    jaxlib's array code reaches for JAX itself on some paths: it imports
    ``jax.core`` for ``ShapedArray`` (to build an aval when reading an array back;
    the class is looked up once per process and kept) and
    ``jax._src.sharding_impls`` for ``make_single_device_sharding`` (on each
    first read of an array through jaxlib). What ``import jax`` finds must not
    matter: with a real JAX installed it would be that JAX (imported as a side
    effect of a read), with none each failed import costs a search of
    ``sys.path``. So those names are briefly modules holding plax's answers.
    Names a real JAX has already loaded are left alone: that JAX answers its own
    lookups; under the drop-in alias plax's own modules answer them, and nothing
    is swapped (another thread may be importing jax meanwhile).
    """

    _stand_ins = None  # built once, on first use

    def __init__(self):
        # Threads read arrays at once: the first to enter puts the stand-ins in, the last to
        # leave takes them out (one saved set, so none is left behind in sys.modules).
        self._lock = threading.Lock()
        self._depth = 0
        self._saved = {}

    def __enter__(self):
        with self._lock:
            # (under the drop-in alias, "jax" is plax, whose modules answer jaxlib themselves:
            # nothing is swapped, so no other thread's ``import jax`` can meet a stand-in)
            if self._depth == 0 and not _aliased():
                stand_ins = self._stand_ins or self._make_stand_ins()
                for name, module in stand_ins.items():
                    current = sys.modules.get(name)
                    if current is None or getattr(current, "__name__", "").startswith("plax"):
                        self._saved[name] = current
                        sys.modules[name] = module
            self._depth += 1
        return self

    def _reset_in_forked_child(self) -> None:
        # Only the forking thread lives on in the child: a read another thread had open
        # never ends there, so its lock and stand-ins are undone here.
        self._lock = threading.Lock()
        if self._depth:
            self._depth = 1
            self.__exit__()

    @classmethod
    def _make_stand_ins(cls) -> dict:
        from plax.core.avals import ShapedArray
        from plax.sharding.single import SingleDeviceSharding
        core = types.ModuleType("jax.core")
        core.ShapedArray = ShapedArray
        impls = types.ModuleType("jax._src.sharding_impls")
        impls.make_single_device_sharding = (
            lambda device, memory_kind=None: SingleDeviceSharding(device, memory_kind=memory_kind))
        src = types.ModuleType("jax._src")
        src.__path__ = []
        src.sharding_impls = impls
        parent = types.ModuleType("jax")  # importing "jax.core" imports "jax" first
        parent.__path__ = []
        parent.core, parent._src = core, src
        cls._stand_ins = {"jax": parent, "jax.core": core, "jax._src": src,
                          "jax._src.sharding_impls": impls}
        return cls._stand_ins

    def __exit__(self, *exc):
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                for name, module in self._saved.items():
                    if module is None:
                        sys.modules.pop(name, None)
                    else:
                        sys.modules[name] = module
                self._saved = {}
        return False


def _aliased() -> bool:
    """Whether ``jax`` is plax (``python -m plax``, ``plax.install_as_jax()``)."""
    return getattr(sys.modules.get("jax"), "__name__", "") == "plax"


answer_jaxlib_lookups = _AnswerJaxlibLookups()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=answer_jaxlib_lookups._reset_in_forked_child)
