"""Run JAX code on plax: ``import jax`` (and every ``jax.<sub>``) resolves to plax.

``install_as_jax()`` puts a finder at the front of ``sys.meta_path`` that answers
``jax`` with the ``plax`` module and ``jax.<sub>`` with ``plax.<sub>``: the very
same module objects, so ``jax.numpy is plax.numpy``. ``python -m plax script.py``
installs it, has the Python processes the script starts install it too (through the
start-up hook in ``_startup/``), and then runs the script.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys

_ALIAS = "jax"
_TARGET = "plax"


def _is_aliased(name: str) -> bool:
    return name == _ALIAS or name.startswith(_ALIAS + ".")


def _target_name(name: str) -> str:
    return _TARGET + name[len(_ALIAS):]


class _AliasLoader(importlib.abc.Loader):
    """Loads ``jax.<sub>`` by importing ``plax.<sub>`` and handing back that module."""

    def __init__(self, module):
        self._module = module
        self._own_spec = getattr(module, "__spec__", None)

    def create_module(self, spec):
        return self._module

    def exec_module(self, module):
        # importlib stamped the alias spec on the module; the module stays plax's own.
        if self._own_spec is not None:
            module.__spec__ = self._own_spec


class JaxAliasFinder(importlib.abc.MetaPathFinder):
    """A ``sys.meta_path`` finder mapping ``jax`` and ``jax.*`` onto ``plax`` and ``plax.*``."""

    def find_spec(self, fullname, path=None, target=None):
        if not _is_aliased(fullname):
            return None
        real = _target_name(fullname)
        try:
            module = importlib.import_module(real)
        except ModuleNotFoundError as e:
            if e.name is not None and e.name != real and not real.startswith(e.name + "."):
                raise  # something plax.<sub> itself needs is missing
            # Never fall through to a real JAX elsewhere on the path.
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: plax runs JAX code with `jax` resolving to plax, "
                f"and plax has no {real!r} module.", name=fullname) from None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(module))


def _foreign_jax_modules() -> list[str]:
    """Names in ``sys.modules`` under ``jax`` that are not plax's own modules."""
    out = []
    for name, module in list(sys.modules.items()):
        if _is_aliased(name) and module is not None:
            own = getattr(module, "__name__", "")
            if own != _target_name(name):
                out.append(name)
    return sorted(out)


def is_installed() -> bool:
    return any(isinstance(f, JaxAliasFinder) for f in sys.meta_path)


def install_as_jax() -> None:
    """Make ``import jax`` and ``import jax.<sub>`` give plax and ``plax.<sub>`` in this process.

    Refuses (``RuntimeError``) when a real ``jax`` has already been imported:
    arrays and tracers of the two libraries cannot mix, so the alias must be
    installed before anything imports JAX. Calling it twice is harmless.
    """
    foreign = _foreign_jax_modules()
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise RuntimeError(
            "plax.install_as_jax(): a real `jax` is already imported in this process "
            f"({shown}). Install the alias before anything imports jax: call "
            "plax.install_as_jax() first, or run the program with `python -m plax script.py`.")
    if not is_installed():
        sys.meta_path.insert(0, JaxAliasFinder())
    sys.modules[_ALIAS] = importlib.import_module(_TARGET)


# The folder of the start-up hook (its sitecustomize.py) that carries the alias into the
# Python processes a ``python -m plax`` program starts.
STARTUP_HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_startup")


def reach_child_processes() -> None:
    """Have every Python process this one starts from now on resolve ``jax`` to plax too.

    The start-up hook's folder goes first on ``PYTHONPATH``, which children inherit:
    ``multiprocessing`` ("spawn", "forkserver"), ``ProcessPoolExecutor``, ``subprocess``
    running ``sys.executable``, and their own children. (A forked child is a copy of this
    process and has the alias already.)
    """
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if STARTUP_HOOK_DIR not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([STARTUP_HOOK_DIR, *parts])
