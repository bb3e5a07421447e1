"""The core tests change global flags; each test gets them back as they were."""
import pytest

from plax.core.config import config


@pytest.fixture(autouse=True)
def _restore_config():
    """Put every flag's global value back, whatever the test did."""
    before = config.values()
    yield
    for name, value in before.items():
        config.update(name, value)
    assert config.values() == before
