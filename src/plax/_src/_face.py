"""What every ``plax._src`` face shares: the module ``__getattr__`` that answers JAX's names a
face does not define itself, from a public plax module of the same role, and refuses the names
plax does not provide with an AttributeError naming the name and why."""
import importlib


def jax_name(module_name: str) -> str:
    """``plax._src.x`` as JAX spells it (``jax._src.x``)."""
    return "jax" + module_name[len("plax"):] if module_name.startswith("plax.") else module_name


def not_provided(module_name: str, name: str, reason: str) -> AttributeError:
    return AttributeError(f"{jax_name(module_name)}.{name} is not provided by plax: {reason}")


def document(doc: str, refused: dict) -> str:
    """``doc`` followed by the names refused, each with its reason."""
    if not refused:
        return doc
    lines = "\n".join(f"- ``{name}``: {why}" for name, why in sorted(refused.items()))
    return f"{doc}\n\nNot provided (AttributeError naming the name):\n\n{lines}\n"


def face_getattr(module_name: str, refused: dict, *fallbacks):
    """A module ``__getattr__``: a name of the first of ``fallbacks`` (modules) that has it;
    else an AttributeError naming it, with plax's reason for a name in ``refused``."""
    def __getattr__(name):
        if not (name.startswith("__") and name.endswith("__")):
            for module in fallbacks:
                try:
                    return getattr(module, name)
                except AttributeError:
                    pass
        if name in refused:
            raise not_provided(module_name, name, refused[name])
        raise AttributeError(f"module {jax_name(module_name)!r} has no attribute {name!r}")
    return __getattr__


def package_getattr(package_name: str, submodules, then=None):
    """A package ``__getattr__`` importing its ``submodules`` on first attribute access (as
    ``jax._src.lax.lax`` is read after ``import jax._src.lax``); other names go to ``then``."""
    def __getattr__(name):
        if name in submodules:
            return importlib.import_module(f"{package_name}.{name}")
        if then is not None:
            return then(name)
        raise AttributeError(f"module {jax_name(package_name)!r} has no attribute {name!r}")
    return __getattr__
