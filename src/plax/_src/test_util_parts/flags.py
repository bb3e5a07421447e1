"""The config flags JAX's test utilities declare, held in plax's config.

Each is a ``TestFlag``: ``.value`` reads it, and because it lives in ``plax.core.config``
``jax.config.update("jax_num_generated_cases", 3)``, ``--jax_num_generated_cases=3`` (read
by ``parse_flags_with_absl``) and the environment variable ``JAX_NUM_GENERATED_CASES`` all
set it, as in JAX.
"""
from __future__ import annotations

from plax.core.config import config


class TestFlag:
    """A flag of JAX's test utilities (``NUM_GENERATED_CASES`` and the like)."""

    __test__ = False  # (not a test class, pytest)

    def __init__(self, name: str, default, kind, help: str = ""):
        self.name = name
        short = name.removeprefix("jax_")
        if short not in config._by_any_name:  # (a reloaded module keeps the first one)
            config.define(short, default, kind=kind, help=help, listed=False)
        self._short = short

    @property
    def value(self):
        """The flag's value in this thread."""
        return config.read(self._short)

    def __repr__(self):
        return f"<TestFlag {self.name}={self.value!r}>"


TEST_DUT = TestFlag("jax_test_dut", "", str,
                    "The device under test, where it needs special consideration.")
NUM_GENERATED_CASES = TestFlag("jax_num_generated_cases", 10, int,
                               "How many cases each sampled parameterized test gets.")
MAX_CASES_SAMPLING_RETRIES = TestFlag(
    "max_cases_sampling_retries", 100, int,
    "Draws in a row that may repeat a case already seen before sampling gives up.")
SKIP_SLOW_TESTS = TestFlag("jax_skip_slow_tests", False, bool,
                           "Skip the tests marked slow.")
TEST_WITH_PERSISTENT_COMPILATION_CACHE = TestFlag(
    "jax_test_with_persistent_compilation_cache", False, bool,
    "Run every test with a fresh persistent compilation cache.")
TEST_NUM_THREADS = TestFlag("jax_test_num_threads", 0, int,
                            "Threads JaxTestLoader runs tests on (0: the main thread).")
TEST_TARGETS = TestFlag("test_targets", "", str,
                        "A regular expression the names of the tests to run must match.")
EXCLUDE_TEST_TARGETS = TestFlag("exclude_test_targets", "", str,
                                "A regular expression naming tests not to run.")
HYPOTHESIS_PROFILE = TestFlag("hypothesis_profile", "deterministic", str,
                              "The hypothesis profile: deterministic or interactive.")
