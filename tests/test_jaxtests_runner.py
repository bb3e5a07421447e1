"""jaxtests/run.py: JAX's test files run on plax, one pytest process per file, scored against
the ids of the cases real JAX passes."""
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("jaxtests_run", ROOT / "jaxtests" / "run.py")
runner = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(runner)

# A small JAX test file (run with jax resolving to plax), written out as sum_test.py.
FILE = (ROOT / "tests" / "data" / "jaxtests_sum_test.jaxpy").read_text()


def test_a_file_runs_with_jax_as_plax_and_is_scored(tmp_path, monkeypatch, capsys):
    (tmp_path / "sum_test.py").write_text(FILE)
    (tmp_path / "helper.py").write_text("")  # not a *_test.py file: not run
    reference = tmp_path / "reference"
    reference.mkdir()
    # JAX passes six cases, one of which plax fails and one plax does not have
    (reference / "sum_test.txt").write_text(
        "TestSum::test_sum\nTestSum::test_wrong\nsum_test::test_x64_default_is_off\n"
        "TestSum::test_gone\nsum_test::test_an_id_with_spaces[<class 'float'>]\n"
        "sum_test::test_named_by_a_module[jax.numpy.sum]\n")
    monkeypatch.setattr(runner, "REFERENCE", reference)
    outcomes, seconds, note = runner.run_file(tmp_path / "sum_test.py", False, 120)
    assert outcomes == {"TestSum::test_sum": "passed", "TestSum::test_wrong": "failed",
                        "TestSum::test_skipped": "skipped",
                        "sum_test::test_x64_default_is_off": "passed",
                        "sum_test::test_an_id_with_spaces[<class 'float'>]": "passed",
                        "sum_test::test_named_by_a_module[plax.numpy.sum]": "passed"}, note
    assert note == "" and seconds > 0
    results = tmp_path / "results"
    assert runner.main(["--tests", str(tmp_path), "--results", str(results)]) == 0
    lines = capsys.readouterr().out.splitlines()
    (row,) = [line for line in lines if line.startswith("sum_test")]
    # (an id may hold spaces; one named by a module is matched as JAX names it)
    assert row.split()[:4] == ["sum_test", "4", "6", "66.7%"]
    assert lines[-1].split()[:4] == ["all", "4", "6", "66.7%"]
    # the outcomes are kept: --score prints the table again without running the file
    (tmp_path / "sum_test.py").write_text("raise SystemExit('not run again')\n")
    assert runner.main(["--tests", str(tmp_path), "--results", str(results), "--score"]) == 0
    assert capsys.readouterr().out.splitlines() == lines


def test_a_file_that_does_not_collect_gets_a_note(tmp_path):
    (tmp_path / "broken_test.py").write_text("from jax._src import no_such_module\n")
    outcomes, _, note = runner.run_file(tmp_path / "broken_test.py", False, 120)
    assert outcomes == {"::broken_test": "error"}
    assert note.startswith("exit 2: 1 error")


def test_the_reference_needs_a_python_with_jax(tmp_path, monkeypatch):
    monkeypatch.delenv("JAX_PYTHON", raising=False)
    (tmp_path / "a_test.py").write_text("")
    assert [p.name for p in runner.test_files(tmp_path, ["a"])] == ["a_test.py"]
    assert runner.test_files(tmp_path, ["b"]) == []
    with pytest.raises(SystemExit, match="--reference needs JAX_PYTHON"):
        runner.run_file(tmp_path / "a_test.py", True, 10)


def test_a_sample_keeps_the_same_cases_on_both_sides():
    plugin = runner.sample_plugin
    assert plugin.sample_sizes("tpu_ops=4, tpu_pallas_test=16") == {
        "tpu_ops_test": 4, "tpu_pallas_test": 16}
    ids = [f"OpsTest::test_case{i}" for i in range(400)]
    kept = [i for i in ids if plugin.kept(i, 4)]
    assert 60 < len(kept) < 140  # (about one in four)
    # plax's ids name plax where JAX's name jax: the same cases are kept
    assert plugin.kept("T::t[plax.numpy.sum]", 4) == plugin.kept("T::t[jax.numpy.sum]", 4)
    # one in 16 is a part of one in 8
    assert all(plugin.kept(i, 8) for i in ids if plugin.kept(i, 16))


# A JAX test file of two TPU-only kernels (run with jax resolving to plax).
TPU_ONLY = (ROOT / "tests" / "data" / "jaxtests_on_tpu_test.jaxpy").read_text()


def test_as_tpu_builds_each_kernel_for_mosaic_then_interprets_it(tmp_path):
    (tmp_path / "on_tpu_test.py").write_text(TPU_ONLY)
    outcomes, _, _ = runner.run_file(tmp_path / "on_tpu_test.py", False, 120)
    assert outcomes == {"OnTpu::test_doubles": "skipped", "OnTpu::test_no_mosaic_rule": "skipped"}
    outcomes, _, _ = runner.run_file(tmp_path / "on_tpu_test.py", False, 120, as_tpu=True)
    # (a kernel whose op Mosaic cannot lower fails as on a chip, though interpreted it would
    # pass)
    assert outcomes == {"OnTpu::test_doubles": "passed", "OnTpu::test_no_mosaic_rule": "failed"}


def test_a_run_goes_on_past_a_case_that_crashes_the_process(tmp_path):
    # (libtpu aborts the whole process on some programs: the other cases must still be scored)
    (tmp_path / "crash_test.py").write_text(
        "import os\n\n"
        "def test_a():\n    assert 1 + 1 == 2\n\n"
        "def test_b_aborts():\n    os.abort()\n\n"
        "def test_c():\n    assert False\n\n"
        "def test_d_aborts_too():\n    os.abort()\n\n"
        "def test_e():\n    pass\n")
    outcomes, _, note = runner.run_file(tmp_path / "crash_test.py", False, 120)
    assert outcomes == {"crash_test::test_a": "passed", "crash_test::test_b_aborts": "failed",
                        "crash_test::test_c": "failed",
                        "crash_test::test_d_aborts_too": "failed",
                        "crash_test::test_e": "passed"}
    assert note.startswith("2 crash(es), run on past them, first in crash_test::test_b_aborts")
