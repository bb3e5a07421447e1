"""A pytest plugin standing in for the conftest.py at the root of Keras's repository, which
its published package (whose tests `make ecosystem` runs) leaves out: Keras's two test
markers, the ``skip_if_backend`` helper some of its test files import from ``conftest``, and
tests marked ``multi_device`` skipped where there is a single device."""
import sys

import pytest

sys.modules.setdefault("conftest", sys.modules[__name__])  # for `from conftest import ...`


def skip_if_backend(given_backend, reason):
    """A mark skipping the test when Keras runs on ``given_backend``."""
    from keras.src.backend import backend
    return pytest.mark.skipif(backend() == given_backend, reason=reason)


def pytest_configure(config):
    config.addinivalue_line("markers", "requires_trainable_backend: needs a backend that trains")
    config.addinivalue_line("markers", "multi_device: needs several devices")


def pytest_collection_modifyitems(config, items):
    import jax  # (plax, in a plax run)
    if jax.device_count() > 1:
        return
    single = pytest.mark.skip(reason="needs several devices")
    for item in items:
        if "multi_device" in item.keywords:
            item.add_marker(single)
