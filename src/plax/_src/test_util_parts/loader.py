"""JaxTestLoader (absltest's loader, filtered by ``JAX_TEST_TARGETS`` and
``JAX_EXCLUDE_TEST_TARGETS``, running tests on ``JAX_TEST_NUM_THREADS`` threads when that
is positive) and the markers of tests that must not run alongside others.

Tests that may share the process take a reader's hold of one lock; a thread-hostile test
class, or a block marked ``thread_unsafe_test()``, a writer's (alone).
"""
from __future__ import annotations

import contextlib
import re
import threading
import unittest
from concurrent.futures import ThreadPoolExecutor

from absl.testing import absltest

from plax._src.test_util_parts import warning_capture
from plax._src.test_util_parts.flags import (EXCLUDE_TEST_TARGETS, TEST_NUM_THREADS,
                                              TEST_TARGETS)


class _ReadersWriterLock:
    """Many readers or one writer."""

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._held = threading.local()

    def reader_lock(self):
        with self._cond:
            self._cond.wait_for(lambda: not self._writing)
            self._readers += 1
        self._held.reading = getattr(self._held, "reading", 0) + 1

    def reader_unlock(self):
        with self._cond:
            self._readers -= 1
            self._cond.notify_all()
        self._held.reading -= 1

    def writer_lock(self):
        with self._cond:
            self._cond.wait_for(lambda: not self._writing and self._readers == 0)
            self._writing = True

    def writer_unlock(self):
        with self._cond:
            self._writing = False
            self._cond.notify_all()

    def assert_reader_held(self):
        assert getattr(self._held, "reading", 0) > 0, "this thread holds no reader lock"


_test_lock = _ReadersWriterLock()


@contextlib.contextmanager
def thread_unsafe_test(condition: bool = True):
    """Marks a test (as a decorator) or a block as not thread-safe: with tests on threads,
    it runs alone. ``condition=False`` marks nothing."""
    if TEST_NUM_THREADS.value <= 0 or not condition:
        yield
        return
    _test_lock.assert_reader_held()
    _test_lock.reader_unlock()
    _test_lock.writer_lock()
    try:
        yield
    finally:
        _test_lock.writer_unlock()
        _test_lock.reader_lock()


def thread_unsafe_test_class(condition: bool = True):
    """Marks a TestCase class as thread-hostile: its tests run alone."""
    def mark(klass):
        assert issubclass(klass, unittest.TestCase), type(klass)
        klass.thread_hostile = condition
        return klass
    return mark


def _run_one_test(test, result):
    hostile = getattr(test.__class__, "thread_hostile", False)
    lock, unlock = ((_test_lock.writer_lock, _test_lock.writer_unlock) if hostile
                    else (_test_lock.reader_lock, _test_lock.reader_unlock))
    lock()
    try:
        test(result)
    finally:
        unlock()


class ThreadSafeTestResult:
    """A test's outcome collected on its own thread and handed to the shared result, under a
    lock, when the test stops."""

    def __init__(self, lock, result):
        self.lock = lock
        self.test_result = result
        self.actions = []

    def startTest(self, test):
        pass

    def stopTest(self, test):
        with self.lock:
            self.test_result.startTest(test)
            for action in self.actions:
                action()
            self.test_result.stopTest(test)

    def _later(self, method, *args):
        self.actions.append(lambda: getattr(self.test_result, method)(*args))

    def addSuccess(self, test):
        self._later("addSuccess", test)

    def addSkip(self, test, reason):
        self._later("addSkip", test, reason)

    def addError(self, test, err):
        self._later("addError", test, err)

    def addFailure(self, test, err):
        self._later("addFailure", test, err)

    def addExpectedFailure(self, test, err):
        self._later("addExpectedFailure", test, err)

    def addUnexpectedSuccess(self, test):
        self._later("addUnexpectedSuccess", test)

    def addSubTest(self, test, subtest, err):
        self._later("addSubTest", test, subtest, err)

    def addDuration(self, test, elapsed):
        if hasattr(self.test_result, "addDuration"):
            self._later("addDuration", test, elapsed)


class JaxTestSuite(unittest.TestSuite):
    """Runs its tests on ``TEST_NUM_THREADS`` threads when that is positive (then without
    setUpClass/setUpModule), else as unittest does."""

    def __init__(self, suite):
        super().__init__(list(suite))

    def run(self, result, debug=False):
        if TEST_NUM_THREADS.value <= 0:
            return super().run(result)
        warning_capture.install_threadsafe_warning_handlers()
        lock = threading.Lock()
        futures = []
        with ThreadPoolExecutor(TEST_NUM_THREADS.value) as executor:
            def submit(test):
                if isinstance(test, unittest.TestSuite):
                    for inner in test:
                        submit(inner)
                else:
                    futures.append(executor.submit(
                        _run_one_test, test, ThreadSafeTestResult(lock, result)))
            submit(self)
            for future in futures:
                future.result()
        return result


class JaxTestLoader(absltest.TestLoader):
    """absltest's loader keeping the tests whose ``Class.method`` name matches
    ``JAX_TEST_TARGETS`` and not ``JAX_EXCLUDE_TEST_TARGETS`` (regular expressions)."""

    suiteClass = JaxTestSuite

    def getTestCaseNames(self, testCaseClass):
        names = super().getTestCaseNames(testCaseClass)
        if TEST_TARGETS.value:
            pattern = re.compile(TEST_TARGETS.value)
            names = [n for n in names if pattern.search(f"{testCaseClass.__name__}.{n}")]
        if EXCLUDE_TEST_TARGETS.value:
            pattern = re.compile(EXCLUDE_TEST_TARGETS.value)
            names = [n for n in names
                     if not pattern.search(f"{testCaseClass.__name__}.{n}")]
        return names
