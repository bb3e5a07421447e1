"""jaxlib's Mosaic TPU bindings, behind one door (the only Pallas module importing jaxlib).

plax's Mosaic lowering writes a kernel as MLIR text (func, arith, math, vector, memref, scf
and the ``tpu`` dialect). Here that text is parsed in an MLIR context with those dialects
registered (which verifies it), then serialised as a ``tpu_custom_call`` carries it: the
``mosaic-serde`` pass renames every op into the versioned ``stable_mosaic`` namespace (for
the given dialect version) and the module is written as MLIR bytecode. ``read_body`` is the
reverse, for tests and debugging. jaxlib is imported on first use only, so that plax works
(in interpret mode) where jaxlib lacks the Mosaic bindings.
"""
from __future__ import annotations

import io
import threading

__all__ = ["MosaicUnavailable", "MosaicModuleError", "available", "serialize",
           "serialize_kernel", "module_from_text", "read_body", "canonical_text"]

_lock = threading.Lock()
_context = None


class MosaicUnavailable(RuntimeError):
    """jaxlib has no Mosaic TPU bindings (``jaxlib.mosaic`` / ``_tpu_ext``)."""


class MosaicModuleError(RuntimeError):
    """MLIR rejected a Mosaic module (a parse or verification error): a bug in a lowering."""


def _make_context():
    try:
        from jaxlib.mlir import ir
        from jaxlib.mlir._mlir_libs import _jax_mlir_ext
        from jaxlib.mosaic.python import tpu
    except ImportError as e:
        raise MosaicUnavailable(
            "Lowering a pallas_call for TPU needs jaxlib's Mosaic TPU bindings "
            f"(jaxlib.mosaic.python.tpu), which this jaxlib lacks ({e}). Run the kernel in "
            "interpret mode (pallas_call(..., interpret=True)) instead.") from e
    context = ir.Context()
    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)  # func, arith, math, vector, memref, scf, ...
    context.append_dialect_registry(registry)
    context.load_all_available_dialects()
    tpu.register_dialect(context)
    return context


def _ctx():
    global _context
    if _context is None:
        _context = _make_context()
    return _context


def available() -> bool:
    """Whether jaxlib's Mosaic bindings can be loaded."""
    try:
        with _lock:
            _ctx()
        return True
    except MosaicUnavailable:
        return False


def _parse(ir, text):
    try:
        return ir.Module.parse(text)
    except ir.MLIRError as e:
        raise MosaicModuleError(f"The Mosaic module did not verify: {e}\n{text}") from None


def _run(module, pipeline: str) -> None:
    from jaxlib.mlir.passmanager import PassManager
    PassManager.parse(pipeline).run(module.operation)


def serialize(text: str, version: int | None) -> bytes:
    """The Mosaic module ``text`` as a ``tpu_custom_call`` body: verified, its ops moved to
    the ``stable_mosaic`` namespace of dialect ``version`` (None: the newest), as bytecode."""
    return serialize_kernel(text, version)[0]


def serialize_kernel(text: str, version: int | None) -> tuple[bytes, bool, bool]:
    """``serialize``'s body, and whether the kernel communicates with other chips (remote
    DMAs or semaphore signals) and whether it uses the barrier semaphore: facts the
    ``tpu_custom_call``'s backend config states."""
    from jaxlib.mlir import ir
    from jaxlib.mosaic.python import tpu
    with _lock, _ctx(), ir.Location.unknown():
        module = _parse(ir, text)
        communicates, barrier = tpu.private_has_communication(module.operation)
        context = module.context
        context.allow_unregistered_dialects = True  # (the renamed ops)
        try:
            target = "" if version is None else f" target-version={int(version)}"
            _run(module, "builtin.module(mosaic-serde{serialize=true" + target + "})")
        finally:
            context.allow_unregistered_dialects = False
        out = io.BytesIO()
        module.operation.write_bytecode(out, desired_version=0)
        return out.getvalue(), bool(communicates), bool(barrier)


def module_from_text(text: str):
    """A Mosaic module written as MLIR text, parsed (and verified) into jaxlib's
    ``ir.Module``: what ``plax.experimental.mosaic.as_tpu_kernel`` takes."""
    from jaxlib.mlir import ir
    with _lock, _ctx(), ir.Location.unknown():
        return _parse(ir, text)


def read_body(body: bytes) -> str:
    """A serialised body back as the module's text (its ops in their dialects again)."""
    from jaxlib.mlir import ir
    with _lock, _ctx(), ir.Location.unknown():
        context = _ctx()
        context.allow_unregistered_dialects = True
        try:
            module = ir.Module.parse(body)
            _run(module, "builtin.module(mosaic-serde{serialize=false})")
        finally:
            context.allow_unregistered_dialects = False
        return str(module)


def canonical_text(text: str) -> str:
    """The module ``text`` after MLIR's canonicalizer: what ``pallas_call(debug=True)``
    prints."""
    from jaxlib.mlir import ir
    with _lock, _ctx(), ir.Location.unknown():
        module = _parse(ir, text)
        _run(module, "builtin.module(canonicalize)")
        return str(module)
