"""Runtime tokens: the order of ordered effects across calls, and ``effects_barrier``.

A program whose jaxpr has ordered effects takes a token first and returns one first
(see ``lowering/stablehlo.define_function``). The token a run returns is the one the
next run on the same devices takes, so XLA starts that run's ordered callbacks only
after the previous run's have finished: callbacks run in the order the Python program
issued them, even though runs are dispatched asynchronously.

Every run of a program with host callbacks also leaves a completion token here;
``effects_barrier()`` waits for all of them (and for the ordered tokens).
"""
from __future__ import annotations

import atexit
import threading

import numpy as np

from plax.core.avals import ShapedArray
from plax.runtime import xla

TOKEN_AVAL = ShapedArray((0,), np.dtype(np.bool_))  # how the runtime holds a token

_lock = threading.Lock()
_ordered: dict = {}     # tuple of devices -> the token the next run on them takes
_by_effect: dict = {}   # ordered effect -> the token the last run having it returned
_pending: list = []     # completion tokens of runs with host callbacks not yet waited on
_MAX_PENDING = 256      # beyond this, the oldest are waited on (they are long done)


def ordered_token(devices: tuple, sharding):
    """The token the next ordered run on ``devices`` takes (a fresh one at first)."""
    token = _ordered.get(devices)
    if token is None:  # (one piece per device of this process: others put their own)
        local = [d for d in devices if d.process_index == d.client.process_index()]
        token = xla.put([np.zeros(0, np.bool_) for _ in local], TOKEN_AVAL, sharding, local,
                        False)
    return token


def set_ordered_token(devices: tuple, token, effects=()) -> None:
    """``token`` is the one a run on ``devices`` having ordered ``effects`` returned."""
    _ordered[devices] = token
    for e in effects:
        _by_effect[e] = token


def current_tokens() -> dict:
    """For each ordered effect run so far: the token the last run having it returned."""
    return dict(_by_effect)


def note_run(done) -> None:
    """Remember the completion token of a run with host callbacks."""
    with _lock:
        _pending.append(done)
        old = _pending[:-_MAX_PENDING] if len(_pending) > _MAX_PENDING else []
        del _pending[:len(old)]
    for token in old:
        xla.wait_for(token)


def barrier() -> None:
    """Wait until every run so far has finished its host callbacks and ordered effects."""
    with _lock:
        waiting = list(_pending)
        _pending.clear()
        ordered = list(_ordered.values())
    failure = None
    for token in waiting:
        try:
            xla.wait_for(token)
        except Exception as e:  # wait for the rest, then report the first failure
            failure = failure or e
    if ordered:
        try:
            xla.block_until_ready(ordered)
        except Exception as e:
            failure = failure or e
    if failure is not None:
        raise failure


def clear() -> None:
    """Forget every token (the backends are being replaced)."""
    with _lock:
        _pending.clear()
        _ordered.clear()
        _by_effect.clear()


def _at_exit() -> None:
    try:
        barrier()  # let pending prints and callbacks finish before the interpreter goes
    except Exception:
        pass


atexit.register(_at_exit)
