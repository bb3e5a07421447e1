"""Tracebacks leaving plax's public entry points lose plax's frames (jax_traceback_filtering)."""
import gc
import os
import traceback
import weakref

import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core.config import config
from plax.core.tracebacks import UnfilteredStackTrace, api_boundary

_PLAX = os.path.dirname(plax.__file__)


def _raised(fun):
    with pytest.raises(Exception) as info:
        fun()
    return info.value


def _frames(e, visible_only=False):
    """(function name, is plax's) of each frame of ``e``'s traceback."""
    out = []
    for frame, _ in traceback.walk_tb(e.__traceback__):
        if visible_only and "__tracebackhide__" in frame.f_locals:
            continue
        out.append((frame.f_code.co_name, frame.f_code.co_filename.startswith(_PLAX)))
    return out


def _nested_jit():
    @plax.jit
    def inner(x):
        raise ValueError("inner failed")

    @plax.jit
    def outer(x):
        return 2 * inner(x)
    return outer(jnp.ones(2))


def _cond():
    def err(_):
        raise ValueError("branch failed")
    return lax.cond(True, err, lambda _: 0.0, 1.0)


def _grad_of_scan():
    def body(c, x):
        raise ValueError("body failed")
    return plax.grad(lambda x: lax.scan(body, x, None, length=2)[0])(1.0)


@pytest.mark.parametrize("program,user_frames", [
    (_nested_jit, ["_nested_jit", "outer", "inner"]),
    (_cond, ["_cond", "err"]),
    (_grad_of_scan, ["_grad_of_scan", "<lambda>", "body"]),
])
@pytest.mark.parametrize("mode", ["remove_frames", "quiet_remove_frames", "auto",
                                  "tracebackhide", "off"])
def test_plax_frames_leave_the_traceback(program, user_frames, mode):
    with config.override("jax_traceback_filtering", mode):
        e = _raised(program)
    assert isinstance(e, ValueError)
    frames = _frames(e, visible_only=mode == "tracebackhide")
    names = [name for name, ours in frames if not ours]
    assert names[-len(user_frames):] == user_frames
    if mode == "off":
        assert any(ours for _, ours in frames)
        assert not getattr(e, "__notes__", None)
        return
    assert not any(ours for _, ours in frames)
    notes = getattr(e, "__notes__", [])
    assert any("For simplicity" in n for n in notes) == (mode in ("quiet_remove_frames", "auto"))
    assert isinstance(e.__cause__, UnfilteredStackTrace) == (mode == "remove_frames")
    if mode == "remove_frames":
        whole = _frames(e.__cause__)
        assert any(ours for _, ours in whole)
        assert str(e.__cause__).startswith("ValueError: ")
        with pytest.raises(UnfilteredStackTrace, match="excludes plax-internal frames"):
            raise e.__cause__


def test_inner_calls_do_not_filter_and_causes_are_kept():
    seen = []

    @plax.jit
    def inner(x):
        raise ValueError("inner")

    @plax.jit
    def outer(x):
        try:
            inner(x)
        except ValueError as e:  # caught between two plax calls: the traceback is whole
            seen.append(any(ours for _, ours in _frames(e)))
            raise TypeError("outer") from e

    with config.override("jax_traceback_filtering", "remove_frames"):
        e = _raised(lambda: outer(1.0))
    assert seen == [True]
    assert isinstance(e, TypeError)
    assert isinstance(e.__cause__, UnfilteredStackTrace)
    assert isinstance(e.__cause__.__cause__, ValueError)
    with pytest.raises(TypeError, match="outer"):
        raise e


@pytest.mark.parametrize("mode", ["remove_frames", "quiet_remove_frames", "tracebackhide"])
def test_api_boundary_keeps_no_cycle(mode):
    class Caller:
        def __call__(self):
            first()

    @api_boundary
    def first():
        second()

    @api_boundary
    def second():
        raise ValueError("second")

    with config.override("jax_traceback_filtering", mode):
        gc.disable()
        try:
            caller = Caller()
            alive = weakref.ref(caller)
            with pytest.raises(ValueError, match="second"):
                caller()
            del caller
            assert alive() is None
        finally:
            gc.enable()


def test_api_boundary_takes_options_and_names():
    @api_boundary(repro_api_name="mine")
    def mine(x):
        """Doc."""
        return x + 1
    assert mine(1) == 2 and mine.__name__ == "mine" and mine.__doc__ == "Doc."
