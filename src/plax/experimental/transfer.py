"""``jax.experimental.transfer``: arrays pulled from another process's devices over the
network (across slices), through jaxlib's transfer server.

A process serving arrays calls ``server.await_pull(uuid, arrays)``; a peer that connected
with ``server.connect(address)`` gets them with ``connection.pull(uuid, shapes)``, a pytree
of ShapeDtypeStructs (with the shardings to place them by). jaxlib's classes are used as
they are; ``pull`` and ``await_pull`` (pytrees in, pytrees out) are added to them here.
"""
from plax.core import tree_core
from plax.runtime import xla

__all__ = ["TransferConnection", "TransferServer", "start_transfer_server", "make_error_array"]

TransferServer = xla.TransferServer
TransferConnection = xla.TransferConnection


def start_transfer_server(client, address: str = "[::]:0", transport_addresses=(),
                          max_num_parallel_copies: int = 8, transfer_size: int = 256 * 2 ** 20,
                          supports_pinned_allocator: bool = False,
                          use_raw_buffers: bool = False) -> TransferServer:
    """A transfer server for ``client``'s devices, listening at ``address`` (host:port; port
    0 picks one) and moving data over ``transport_addresses``."""
    return xla.start_transfer_server(client, address, list(transport_addresses),
                                     max_num_parallel_copies, transfer_size,
                                     supports_pinned_allocator, use_raw_buffers)


def _pull(self, uuid: int, xs, timeout=None):
    """The arrays the peer offered under ``uuid``, shaped and placed as the pytree of
    ShapeDtypeStructs ``xs``; ``timeout``: an absolute ``datetime``."""
    flat, tree = tree_core.tree_flatten(xs)
    if not flat:
        return xs
    client = next(iter(flat[0].sharding.device_set)).client
    if timeout is None:
        return tree_core.tree_unflatten(tree, self._pull_flat(uuid, client, flat))
    return tree_core.tree_unflatten(tree, self._pull_flat(uuid, client, flat, timeout=timeout))


def _await_pull(self, uuid: int, arrays, timeout=None) -> None:
    """Offer the pytree ``arrays`` to be pulled once by a peer under ``uuid``."""
    flat = tree_core.tree_flatten(arrays)[0]
    if timeout is None:
        self._await_pull_flat(uuid, flat)
    else:
        self._await_pull_flat(uuid, flat, timeout=timeout)


TransferConnection.pull = _pull
TransferServer.await_pull = _await_pull

if xla.make_error_array is not None:
    def make_error_array(aval, message):
        """An array of ``aval``'s type and placement that holds an error: a program that
        reads it fails with ``message``."""
        client = next(iter(aval.sharding.device_set)).client
        return xla.make_error_array(client, aval, str(message))
