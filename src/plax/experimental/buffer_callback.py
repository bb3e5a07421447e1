"""``jax.experimental.buffer_callback``: Python callbacks that write a program's results in
place, on device buffers (the CPU and GPUs)."""
from plax.ffi.buffer_callback import buffer_callback
from plax.runtime.xla import FfiBuffer as Buffer
from plax.runtime.xla import FfiExecutionContext as ExecutionContext
from plax.runtime.xla import FfiExecutionStage as ExecutionStage

__all__ = ["Buffer", "ExecutionContext", "ExecutionStage", "buffer_callback"]
