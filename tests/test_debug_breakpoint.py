"""debug.breakpoint: the (jdb) prompt, fed commands on stdin, shows the values traced
variables have when the program runs, under jit, vmap, grad and a loop; in-process tests
drive the debugger's commands on recorded frames."""
import io
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.api.debugger import CliDebugger, DebuggerFrame

PROGRAM = textwrap.dedent("""
    import plax
    import plax.numpy as jnp
    from plax import lax

    def f(x):
        y = jnp.sin(x) * 2.0
        plax.debug.breakpoint()
        return y + 1.0

    print("jit", plax.jit(f)(jnp.arange(3.0)))
    print("vmap", plax.vmap(f)(jnp.arange(2.0)))
    print("grad", plax.grad(lambda x: f(x).sum())(jnp.arange(2.0)))

    def body(i, carry):
        plax.debug.breakpoint()
        return carry * 3.0
    print("loop", plax.jit(lambda c: lax.fori_loop(0, 2, body, c))(jnp.float32(1.0)))
""")


def _run(program: str, commands: str) -> str:
    env = dict(os.environ, PLAX_NUM_CPU_DEVICES="1")
    done = subprocess.run([sys.executable, "-c", program], input=commands, capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def session():
    commands = "\n".join([
        "p x", "p y", "c",                  # jit
        "p x", "c", "p x", "c",             # vmap: one prompt per batch member
        "p x", "c",                         # grad: the primal values
        "p (i, carry)", "c", "p (i, carry)", "c",  # fori_loop: one prompt per iteration
    ]) + "\n"
    return _run(PROGRAM, commands)


def _answers(out: str) -> list:
    """What each command printed, in order."""
    parts = out.split("(jdb) ")[1:]
    return [p.split("\n")[0] for p in parts]


def test_the_prompt_shows_runtime_values_under_jit_vmap_grad_and_loops(session):
    answers = _answers(session)
    assert answers[0] == "Array([0., 1., 2.], dtype=float32)"
    y = np.sin(np.arange(3.0, dtype=np.float32)) * 2
    assert answers[1].startswith("Array([0.") and "dtype=float32" in answers[1]
    np.testing.assert_allclose(eval(answers[1].replace("Array", "np.array").replace(
        "dtype=float32", "dtype=np.float32")), y, rtol=1e-6)
    assert answers[3] == "Array(0., dtype=float32)" and answers[5] == "Array(1., dtype=float32)"
    assert answers[7] == "Array([0., 1.], dtype=float32)"
    assert answers[9].startswith("(Array(0, dtype=int32") and "Array(1., dtype=float32)" in \
        answers[9]
    assert answers[11].startswith("(Array(1, dtype=int32") and "Array(3., dtype=float32)" in \
        answers[11]
    assert session.count("Entering jdb:") == 6


def test_the_program_continues_with_its_results(session):
    printed = [line.replace("(jdb) ", "") for line in session.splitlines()]
    lines = {line.split(" ", 1)[0]: line for line in printed
             if line.startswith(("jit", "vmap", "grad", "loop"))}
    np.testing.assert_allclose(np.array(lines["jit"].split("[")[-1].rstrip("]").split(),
                                        float), np.sin([0.0, 1.0, 2.0]) * 2 + 1, rtol=1e-5)
    np.testing.assert_allclose(np.array(lines["grad"].split("[")[-1].rstrip("]").split(),
                                        float), np.cos([0.0, 1.0]) * 2, rtol=1e-5)
    assert lines["loop"] == "loop 9.0"


def test_quit_ends_the_process():
    out = _run(PROGRAM, "q\n")
    assert out.count("Entering jdb:") == 1 and "jit" not in out


def _frames():
    def inner(a):
        b = a + 1
        return [DebuggerFrame.of(info) for info in __import__("inspect").stack()[:2]]
    return inner(41)


@pytest.mark.parametrize("commands, expected", [
    ("p b\nc\n", "42"),
    ("b * 2\nc\n", "84"),                          # a bare expression is printed too
    ("pp {'k': list(range(3))}\nc\n", "{'k': [0, 1, 2]}"),
    ("p nope\nc\n", "*** NameError: name 'nope' is not defined"),
    ("u\np 'a' in dir()\nc\n", "False"),           # the caller's frame has no ``a``
    ("d\nc\n", "At bottommost frame."),
    ("w\nc\n", "Traceback:"),
    ("l\nc\n", "->          return [DebuggerFrame.of(info)"),
])
def test_debugger_commands(commands, expected):
    out = io.StringIO()
    CliDebugger(_frames(), stdin=io.StringIO(commands), stdout=out).cmdloop()
    assert expected in out.getvalue()


def test_breakpoint_arguments():
    with pytest.raises(ValueError, match="`ordered` and `token` are mutually exclusive"):
        plax.debug.breakpoint(ordered=True, token=jnp.ones(2))
    # With a token, the breakpoint passes it through (here the prompt reads from a string).
    out = io.StringIO()
    f = plax.jit(lambda x: plax.debug.breakpoint(token=x * 2, stdin=io.StringIO("p x\nc\n"),
                                                 stdout=out) + 1)
    np.testing.assert_allclose(f(jnp.ones(2)), [3.0, 3.0])
    assert "Array([1., 1.], dtype=float32)" in out.getvalue()
