"""``plax.ffi``: calling compiled C/C++ kernels through XLA's foreign function interface.

A kernel written against the headers jaxlib ships (``include_dir()``, ``xla/ffi/api/ffi.h``)
and loaded with ``ctypes`` is registered as a custom-call target
(``register_ffi_target(name, pycapsule(lib.Handler))``) and called from traced or eager code
with ``ffi_call(name, result_shape_dtypes, ...)(*args, **attributes)``. A library's own
primitive lowers to such a call with ``interpreters.mlir.register_lowering(prim,
ffi_lowering(name))``.
"""
from __future__ import annotations

import ctypes

from plax.ffi.call import ffi_call
from plax.ffi.custom_call import CustomCallSpec, build, emit, unwrap_attributes
from plax.runtime import xla

__all__ = ["build_ffi_lowering_function", "ffi_call", "ffi_lowering", "include_dir",
           "pycapsule", "register_ffi_target", "register_ffi_target_as_batch_partitionable",
           "register_ffi_type", "register_ffi_type_id"]


def register_ffi_target(name: str, fn, platform: str = "cpu", api_version: int = 1,
                        **kwargs) -> None:
    """Register ``fn`` as the FFI target ``name`` on ``platform``: a PyCapsule holding the
    handler (see ``pycapsule``), or a dict of them by FFI stage ("execute", ...).
    ``api_version``: 1 for the typed FFI (the default), 0 for the older custom-call API.
    Other keyword arguments (``traits=``) go to XLA's registration."""
    xla.register_custom_call_target(name, fn, platform, api_version, **kwargs)


def register_ffi_type_id(name: str, obj, platform: str = "cpu") -> None:
    """Removed from JAX with jaxlib 0.8 (its version 381): use ``register_ffi_type``."""
    raise ValueError("register_ffi_type_id is not supported after jaxlib version 381: "
                     "register the type with plax.ffi.register_ffi_type(name, "
                     "{'type_id': ..., 'type_info': ...}) instead.")


def register_ffi_type(name: str, type_registration, platform: str = "cpu") -> None:
    """Register a user type of the FFI: ``type_registration`` is a dict with ``type_id`` (a
    PyCapsule of the ``XLA_FFI_TypeId`` XLA fills in) and optionally ``type_info`` (one of
    the ``XLA_FFI_TypeInfo``)."""
    xla.register_custom_type(name, type_registration, platform)


def register_ffi_target_as_batch_partitionable(name: str) -> None:
    """Declare the FFI target ``name`` batch partitionable: XLA's partitioner may run it on
    each shard of its leading (batch) dimensions independently."""
    xla.register_custom_call_as_batch_partitionable(name)


def pycapsule(funcptr):
    """A PyCapsule holding ``funcptr`` (a function or address loaded with ``ctypes``), the
    form ``register_ffi_target`` takes."""
    make = ctypes.pythonapi.PyCapsule_New
    make.restype = ctypes.py_object
    make.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    address = ctypes.cast(funcptr, ctypes.c_void_p).value
    if not address:
        raise ValueError(f"pycapsule needs a non-null function pointer, got {funcptr!r}.")
    return make(address, None, None)


def include_dir() -> str:
    """The directory of the C/C++ headers bundled with jaxlib (``xla/ffi/api/ffi.h``): pass
    it to the compiler as ``-I``."""
    return xla.include_dir()


_LOWERING_ARGS = ("api_version", "has_side_effect", "operand_output_aliases")


def _spec(call_target_name, operand_layouts, result_layouts, backend_config,
          skip_ffi_layout_processing, lowering_args, params) -> CustomCallSpec:
    unknown = sorted(set(lowering_args) - set(_LOWERING_ARGS))
    if unknown:
        raise TypeError(f"ffi_lowering got unsupported arguments {unknown}; plax's FFI "
                        f"lowering takes {list(_LOWERING_ARGS)} besides its own.")
    api_version = int(lowering_args.get("api_version", 4))
    if api_version >= 4:
        if backend_config is not None and not isinstance(backend_config, dict):
            raise ValueError("When api_version > 4, backend_config must be a dictionary.")
        config = dict(backend_config or {}, **unwrap_attributes(params.items()))
    else:
        if params:
            raise ValueError("The use of ffi_call attributes requires a custom call API "
                             f"version of at least 4; got api_version={api_version}.")
        config = backend_config
    aliases = tuple(sorted((int(i), int(o)) for i, o in
                           (lowering_args.get("operand_output_aliases") or {}).items()))
    keep = not skip_ffi_layout_processing
    return CustomCallSpec(call_target_name, api_version, config,
                          bool(lowering_args.get("has_side_effect", False)),
                          tuple(operand_layouts) if keep and operand_layouts is not None
                          else None,
                          tuple(result_layouts) if keep and result_layouts is not None
                          else None, aliases)


def build_ffi_lowering_function(call_target_name: str, *, operand_layouts=None,
                                result_layouts=None, backend_config=None,
                                skip_ffi_layout_processing: bool = False, **lowering_args):
    """A function ``(ctx, *operands, **attributes) -> op`` building the custom call to
    ``call_target_name`` inside a lowering rule written with jaxlib's MLIR bindings.
    Layouts here are minor-to-major (XLA's order; ``None``: row-major); keyword arguments
    of the call become attributes, added to ``backend_config``."""
    def lowering_op(ctx, *operands, **params):
        spec = _spec(call_target_name, operand_layouts, result_layouts, backend_config,
                     skip_ffi_layout_processing, lowering_args, params)
        return build(ctx, spec, operands)
    return lowering_op


class _FfiLowering:
    """The rule ``ffi_lowering`` makes: called by the MLIR-bindings machinery it returns
    ``ir.Value``s, and registered it lowers with plax's own text rule (``plax_rule``)."""

    def __init__(self, call_target_name, operand_layouts, result_layouts, backend_config,
                 skip_ffi_layout_processing, lowering_args):
        self._args = (call_target_name, operand_layouts, result_layouts, backend_config,
                      skip_ffi_layout_processing, lowering_args)
        _spec(*self._args, {})  # argument errors now, not at the first lowering

    def __call__(self, ctx, *operands, **params):
        name, *rest, lowering_args = self._args
        return list(build_ffi_lowering_function(
            name, operand_layouts=rest[0], result_layouts=rest[1], backend_config=rest[2],
            skip_ffi_layout_processing=rest[3], **lowering_args)(ctx, *operands,
                                                                 **params).results)

    def plax_rule(self, ctx, *operands, **params):
        return emit(ctx, _spec(*self._args, params), operands)

    def __repr__(self):
        return f"ffi_lowering({self._args[0]!r})"


def ffi_lowering(call_target_name: str, *, operand_layouts=None, result_layouts=None,
                 backend_config=None, skip_ffi_layout_processing: bool = False,
                 **lowering_args):
    """A lowering rule for a primitive whose computation is the FFI target
    ``call_target_name``: register it with ``interpreters.mlir.register_lowering(prim,
    ffi_lowering(name))``. The primitive's parameters become the call's attributes; layouts
    are minor-to-major (``None``: row-major)."""
    return _FfiLowering(call_target_name, operand_layouts, result_layouts, backend_config,
                        skip_ffi_layout_processing, lowering_args)
