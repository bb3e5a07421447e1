"""``python -m plax SCRIPT [ARGS...]``: run a JAX program with ``import jax`` resolving to plax."""
from __future__ import annotations

import os
import runpy
import sys

USAGE = """\
usage: python -m plax SCRIPT [ARGS...]
       python -m plax -m MODULE [ARGS...]
       python -m plax -c CODE [ARGS...]
       python -m plax --version | --help

Runs a JAX program on plax, unchanged: inside it, `import jax` and every
`import jax.<sub>` (jax.numpy, jax.lax, jax.tree_util, ...) give plax and
plax.<sub>. SCRIPT runs as `python SCRIPT` would run it (as __main__, with
sys.argv[1:] = ARGS and its folder first on sys.path); -m runs a module as
`python -m MODULE` does (e.g. `python -m plax -m pytest tests/`), -c a string
of code. From Python, plax.install_as_jax() installs the same alias.

The Python processes the program starts (multiprocessing with any start
method, ProcessPoolExecutor, subprocess running sys.executable) resolve
`jax` to plax too: a start-up hook reaches them through PYTHONPATH.

It refuses to start if a real `jax` is already imported in the process.
"""


def _version_text() -> str:
    from importlib import metadata
    from plax import version
    try:
        own = metadata.version("plax")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        own = "(not installed)"
    return (f"plax {own} (mirrors the JAX {version.__version__} API; "
            f"jaxlib {version.jaxlib_version})\n"
            "`python -m plax SCRIPT` runs SCRIPT with `import jax` resolving to plax.")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if argv else 2
    if argv[0] == "--version":
        print(_version_text())
        return 0
    from plax.drop_in import install_as_jax, reach_child_processes
    try:
        install_as_jax()
    except RuntimeError as e:
        print(f"python -m plax: {e}", file=sys.stderr)
        return 1
    reach_child_processes()
    if argv[0] in ("-m", "-c"):
        if len(argv) < 2:
            print(f"python -m plax: option {argv[0]} needs an argument\n\n{USAGE}",
                  file=sys.stderr, end="")
            return 2
        flag, what, rest = argv[0], argv[1], argv[2:]
        if flag == "-m":
            sys.argv = [what, *rest]
            runpy.run_module(what, run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c", *rest]
            exec(compile(what, "<string>", "exec"), {"__name__": "__main__"})
        return 0
    if argv[0].startswith("-"):
        print(f"python -m plax: unknown option {argv[0]}\n\n{USAGE}", file=sys.stderr, end="")
        return 2
    script = argv[0]
    if not os.path.exists(script):
        print(f"python -m plax: can't open file {script!r}: no such file", file=sys.stderr)
        return 2
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(script))  # where `python SCRIPT` looks first
    # (the script's code is named by its absolute path, as `python SCRIPT` names it: tracebacks
    # and source locations show that path)
    runpy.run_path(os.path.abspath(script), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
