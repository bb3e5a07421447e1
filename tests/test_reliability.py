"""The fast cases of the reliability suite (reliability/run.py, `make reliability` runs all),
at their quick sizes: each is a JAX program run in its own process with `python -m plax`."""
import importlib.util
import os
import sys

import pytest

RUNNER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "reliability", "run.py")
_spec = importlib.util.spec_from_file_location("reliability_run", RUNNER)
reliability = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = reliability  # (its dataclasses look their module up there)
_spec.loader.exec_module(reliability)

FAST = [c for c in reliability.CASES if c.fast]


def test_the_fast_subset_is_a_real_part_of_the_suite():
    assert 5 <= len(FAST) < len(reliability.CASES)
    for case in reliability.CASES:
        assert os.path.exists(os.path.join(reliability.CASES_DIR, case.program + ".jaxpy"))


@pytest.mark.parametrize("case", FAST, ids=lambda c: c.name)
def test_reliability_case(case):
    outcome = reliability.run_case(case, sys.executable, as_plax=True, quick=True)
    assert outcome.status == "ok", f"{case.name}: {outcome.status}: {outcome.detail}"
