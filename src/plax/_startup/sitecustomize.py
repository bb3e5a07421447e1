"""Start-up hook of the Python processes a ``python -m plax`` program starts.

``python -m plax`` puts this file's folder first on ``PYTHONPATH``, so every Python
process the program starts (``multiprocessing`` with "spawn" or "forkserver",
``ProcessPoolExecutor``, ``subprocess`` running ``sys.executable``, their children in
turn) imports this module while the interpreter starts, as Python imports any
``sitecustomize``. A process started any other way never sees it and pays nothing.

It installs a finder that, at the first ``import jax``, installs plax's alias
(``plax.install_as_jax()``): a child that never imports jax never imports plax either.
Then it runs the ``sitecustomize`` this one hides, if the interpreter has one.
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


class _InstallPlaxAtFirstJaxImport:
    """Answers nothing itself: at the first ``jax`` import, installs plax's alias finder
    (which answers that import and every later one) and steps aside."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != "jax" and not fullname.startswith("jax."):
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not cls]
        try:
            from plax.drop_in import JaxAliasFinder, install_as_jax
        except ImportError:  # an interpreter without plax: its own jax, if any, answers
            return None
        install_as_jax()
        return JaxAliasFinder().find_spec(fullname, path, target)

    @classmethod
    def invalidate_caches(cls):
        pass


def _run_hidden_sitecustomize() -> None:
    """Run the ``sitecustomize`` that would have run without this folder on the path."""
    from importlib.machinery import PathFinder  # (not importlib.util: slower to import)
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = type(sys)(spec.name)
    module.__spec__, module.__loader__, module.__file__ = spec, spec.loader, spec.origin
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


sys.meta_path.insert(0, _InstallPlaxAtFirstJaxImport)
_run_hidden_sitecustomize()
