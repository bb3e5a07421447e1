"""Every sharding test starts and ends without a global context mesh (set_mesh(None)), so a
test that sets one cannot leak it into the next."""
import pytest

import plax


@pytest.fixture(autouse=True)
def _no_global_mesh():
    plax.set_mesh(None)
    yield
    plax.set_mesh(None)
