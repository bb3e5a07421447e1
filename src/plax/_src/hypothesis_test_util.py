"""``jax._src.hypothesis_test_util``: running JAX's hypothesis-based tests.

``setup_hypothesis()`` registers and loads JAX's two hypothesis profiles:
"deterministic" (the default: derandomized, no deadline, no example database,
``max_examples`` examples) and "interactive" (one verbose example, no shrinking), chosen
by ``JAX_HYPOTHESIS_PROFILE`` / ``--jax_hypothesis_profile``.

With ``TEST_TOTAL_SHARDS`` > 1, ``HypothesisShardedTestCase`` spreads a hypothesis test's
examples over the shards (each example runs on the shard its call's hash picks) and the
other tests round-robin over them; ``HypothesisShardedTestLoader`` leaves such classes
whole on every shard. With one shard (pytest's case) both change nothing.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import os
import unittest

import hypothesis as hp
from hypothesis import errors as hp_errors
from hypothesis.internal import detection, reflection
from hypothesis.strategies._internal import core as hps_internal_core

from plax._src import test_util as jtu
from plax._src.test_util_parts.flags import HYPOTHESIS_PROFILE  # noqa: F401
from plax._src.test_util_parts.loader import JaxTestLoader

_TEST_SHARD_INDEX = int(os.environ.get("TEST_SHARD_INDEX", "0"))
_TEST_TOTAL_SHARDS = int(os.environ.get("TEST_TOTAL_SHARDS", "1"))


def hypothesis_inner_test_shard(inner_test, args, kwargs, total_shards) -> int:
    """The shard an example (a call of ``inner_test``) runs on: the MD5 of its repr."""
    text = reflection.repr_call(inner_test, args, kwargs)
    return int(hashlib.md5(text.encode()).hexdigest(), 16) % total_shards


def _shard_aware_hypothesis_inner_test(inner_test):
    @functools.wraps(inner_test)
    def run_if_mine(*args, **kwargs):
        if _TEST_TOTAL_SHARDS == 1:
            return inner_test(*args, **kwargs)
        self = kwargs["self"] if "self" in kwargs else args[0]
        if getattr(self, "_hypothesis_failed", False):  # shrinking: run everything
            return inner_test(*args, **kwargs)
        if hypothesis_inner_test_shard(inner_test, args, kwargs,
                                       _TEST_TOTAL_SHARDS) != _TEST_SHARD_INDEX:
            return None  # (not a skip: that would skip the whole test)
        try:
            return inner_test(*args, **kwargs)
        except (hp_errors.UnsatisfiedAssumption, unittest.SkipTest):
            raise
        except Exception:
            self._hypothesis_failed = True
            raise
    return run_if_mine


def _shard_aware_test(test, shard_index):
    """A plain test that runs only on shard ``shard_index``."""
    @functools.wraps(test)
    def run_if_mine(*args, **kwargs):
        if _TEST_SHARD_INDEX != shard_index:
            return unittest.skip(f"Running on shard {shard_index}")(test)(*args, **kwargs)
        return test(*args, **kwargs)
    return run_if_mine


def _apply_sharding_to_tests(test_class):
    shard_indices = itertools.cycle(range(_TEST_TOTAL_SHARDS))
    for name in dir(test_class):
        if not name.startswith("test"):
            continue
        test = getattr(test_class, name)
        if detection.is_hypothesis_test(test):
            handle = test.hypothesis
            assert isinstance(handle, hp.core.HypothesisHandle)
            if any(isinstance(s, hps_internal_core.DataStrategy)
                   for s in handle._given_kwargs.values()):
                raise ValueError(
                    "Sharded hypothesis runner does not support `data()` inside `@given`. "
                    "All parameters must be drawn before the test body is called. Consider "
                    "using `@composite` instead.")
            handle.inner_test = _shard_aware_hypothesis_inner_test(handle.inner_test)
        else:
            setattr(test_class, name, _shard_aware_test(test, next(shard_indices)))


class HypothesisShardedTestCase(jtu.JaxTestCase):
    """A JaxTestCase whose hypothesis tests' examples are spread over test shards (use it
    with ``HypothesisShardedTestLoader``)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if _TEST_TOTAL_SHARDS > 1:
            _apply_sharding_to_tests(cls)


class HypothesisShardedTestLoader(JaxTestLoader):
    """A loader that gives every shard all of a ``HypothesisShardedTestCase``'s tests."""

    def getTestCaseNames(self, testCaseClass):
        self._current_test_class = testCaseClass
        return super().getTestCaseNames(testCaseClass)

    def shardTestCaseNames(self, iterator, ordered_names, shard_index):
        if issubclass(self._current_test_class, HypothesisShardedTestCase):
            return ordered_names
        return super().shardTestCaseNames(iterator, ordered_names, shard_index)


def hypothesis_is_thread_safe() -> bool:
    """Whether the installed hypothesis is thread-safe (6.136.9 and later)."""
    return tuple(int(x) for x in hp.__version__.split(".")) >= (6, 136, 9)


def setup_hypothesis(max_examples=30) -> None:
    """Register JAX's hypothesis profiles and load the one ``HYPOTHESIS_PROFILE`` names."""
    # Subclasses sharing a test method share hypothesis' key for it; with no example
    # database that is harmless, so the health check about it is off.
    suppressed = []
    if hasattr(hp.HealthCheck, "differing_executors"):
        suppressed.append(hp.HealthCheck.differing_executors)
    if jtu.is_asan() or jtu.is_msan() or jtu.is_tsan():
        suppressed.append(hp.HealthCheck.too_slow)
    hp.settings.register_profile(
        "deterministic", database=None, derandomize=True, deadline=None,
        max_examples=max_examples, print_blob=True, suppress_health_check=suppressed)
    hp.settings.register_profile(
        "interactive", parent=hp.settings.load_profile("deterministic"), max_examples=1,
        report_multiple_bugs=False, verbosity=hp.Verbosity.verbose,
        phases=(hp.Phase.explicit, hp.Phase.reuse, hp.Phase.generate, hp.Phase.target,
                hp.Phase.explain))
    profile = HYPOTHESIS_PROFILE.value
    logging.info("Using hypothesis profile: %s", profile)
    hp.settings.load_profile(profile)
