"""A pytest plugin: absl's flags marked parsed, as absltest.main leaves them (some suites read
flags such as ``--test_srcdir`` in their tests, which pytest would otherwise refuse)."""
from absl import flags


def pytest_configure(config):
    flags.FLAGS.mark_as_parsed()
