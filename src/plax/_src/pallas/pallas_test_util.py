"""``jax._src.pallas.pallas_test_util`` (a helper of JAX's own Pallas tests, not in JAX's
wheel), ours: test cases whose ``pallas_call`` runs in interpret mode where ``INTERPRET`` is
set, and otherwise only on an accelerator."""
from plax._src import test_util as jtu
from plax.experimental.pallas.call import pallas_call as _pallas_call


@jtu.with_config(jax_traceback_filtering="off")
class PallasTest(jtu.JaxTestCase):
    """Interpret-mode cases run on the CPU only; compiled ones never on the CPU."""

    INTERPRET: bool = False

    def setUp(self):
        on_cpu = jtu.test_device_matches(["cpu"])
        if self.INTERPRET and not on_cpu:
            self.skipTest("Only run interpret tests on CPU.")
        if not self.INTERPRET and on_cpu:
            self.skipTest("On CPU the test works only in interpret mode")
        super().setUp()

    def pallas_call(self, *args, **kwargs):
        return _pallas_call(*args, **kwargs, interpret=self.INTERPRET)


class PallasTPUTest(PallasTest):
    """Cases for TPUs, or for interpret mode on the CPU."""

    def setUp(self):
        if not self.INTERPRET and not jtu.test_device_matches(["tpu"]):
            self.skipTest("Test requires TPUs")
        super().setUp()
