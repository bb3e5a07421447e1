"""``jax._src.distributed``: ``global_state``, the distributed run as this process sees it."""
from plax.runtime import distributed as _runtime


class _GlobalState:
    """JAX's ``distributed.State`` read off plax's runtime: process 0 of 1, with no client
    or service, until ``plax.distributed.initialize()`` connects this process."""

    @property
    def _run(self):
        return _runtime.current()

    @property
    def process_id(self) -> int:
        run = self._run
        return 0 if run is None else run.process_id

    @property
    def num_processes(self) -> int:
        run = self._run
        return 1 if run is None else run.num_processes

    @property
    def client(self):
        run = self._run
        return None if run is None else run.client

    @property
    def service(self):
        run = self._run
        return None if run is None else run.service

    @property
    def coordinator_address(self):
        run = self._run
        return None if run is None else run.coordinator

    def __repr__(self):
        return (f"<distributed state: process {self.process_id} of {self.num_processes}, "
                f"coordinator {self.coordinator_address}>")


global_state = _GlobalState()
