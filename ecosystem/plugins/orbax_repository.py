"""A pytest plugin for orbax's tests, run from its repository's test files (run.py's "git").

- Some test modules import helpers that are test files themselves, which orbax's packages
  leave out (``orbax.checkpoint._src.testing.multiprocess_test``): a module that the installed
  package lacks is looked up among the repository's test files.
- Many test classes derive from that helper's ``MultiProcessTest``, whose setUp waits at the
  barriers of JAX's distributed service (orbax runs them in several processes through its own
  launcher): here they run in one process, with the service started for it.
"""
import importlib.abc
import importlib.util
import sys

import jax
import portpicker


class RepositoryTestModules(importlib.abc.MetaPathFinder):
    def __init__(self, source):
        self.source = source

    def find_spec(self, name, path=None, target=None):
        file = self.source.joinpath(*name.split(".")).with_suffix(".py")
        return importlib.util.spec_from_file_location(name, file) if file.is_file() else None


def pytest_configure(config):
    sys.meta_path.append(RepositoryTestModules(config.rootpath / "checkpoint"))
    port = portpicker.pick_unused_port()
    jax.distributed.initialize(f"localhost:{port}", num_processes=1, process_id=0)
