"""``plax.extend.xla``: XLA passes of a program's own, as ``jax.extend.xla``.

``register_hlo_module_transformation(callback, name=..., stage=...)`` makes XLA call
``callback(serialized HloModuleProto) -> bytes | None`` while compiling (on the CPU client):
a new serialized module replaces the program, None leaves it as it is. While any is
registered, programs are compiled afresh rather than loaded from plax's persistent cache,
so the pass sees every compilation.
"""
from __future__ import annotations

import enum

from plax.runtime import xla as _xla

__all__ = ["PipelineStage", "clear_hlo_module_transformation",
           "register_hlo_module_transformation"]


class PipelineStage(enum.Enum):
    """Where in XLA's pipeline a pass runs."""
    PRE_SCHEDULER = 0
    POST_SCHEDULER = 1


def _platforms(platforms) -> list:
    if platforms is None:
        return ["cpu"]
    return [platforms] if isinstance(platforms, str) else list(dict.fromkeys(platforms))


def _stage(stage) -> int:
    if not isinstance(stage, PipelineStage):
        raise TypeError(f"stage must be a PipelineStage enum, got {type(stage)}")
    return stage.value


def register_hlo_module_transformation(callback, *, name: str,
                                       stage: PipelineStage = PipelineStage.PRE_SCHEDULER,
                                       platforms=None) -> None:
    """Run ``callback`` as the XLA pass ``name`` at ``stage`` of every compilation for
    ``platforms`` (plax compiles for "cpu")."""
    stage_int = _stage(stage)
    if not callable(callback):
        raise TypeError(f"register_hlo_module_transformation: callback must be callable, "
                        f"got {callback!r}")
    if "cpu" in _platforms(platforms):
        _xla.register_hlo_transform(name, stage_int, callback)


def clear_hlo_module_transformation(name: str,
                                    stage: PipelineStage = PipelineStage.PRE_SCHEDULER,
                                    platforms=None) -> bool:
    """Remove the pass ``name`` at ``stage``; whether one was registered."""
    stage_int = _stage(stage)
    if "cpu" in _platforms(platforms):
        return _xla.clear_hlo_transform(name, stage_int)
    return False
