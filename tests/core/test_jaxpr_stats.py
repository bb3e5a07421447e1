"""core/jaxpr_stats.py and core/jaxpr_html.py: equation histograms over nested jaxprs, the
tracebacks equations were staged from, the pprof profile, the HTML page."""
import base64
import gzip
import json
import re

import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.core import jaxpr_stats as st
from plax.core.jaxpr import Jaxpr
from plax.core.jaxpr_html import jaxpr_to_html
from plax.core.source_info import Traceback, traceback_of
from plax.runtime import xla


@plax.jit
def _inner(x):
    return lax.sin(x) * 2.0        # line A: sin, mul


def _outer(x):
    y = lax.cond(x > 0, _inner, lambda v: v - 1.0, x)   # line B: gt, cond (+ convert)
    return jnp.cos(y)              # line C: cos


def _closed():
    return plax.make_jaxpr(_outer)(1.0)


def _line_of(text: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if text in line)


def test_histograms_count_nested_equations():
    closed = _closed()
    prims = st.primitives(closed)
    assert prims == {"gt": 1, "convert_element_type": 1, "cond": 1, "sub": 1, "jit": 1,
                     "sin": 1, "mul": 1, "cos": 1}
    assert st.count_eqns(closed) == st.count_eqns(closed.jaxpr) == sum(prims.values())
    shapes = st.primitives_by_shape(closed.jaxpr)
    assert shapes["gt :: bool[]"] == 1 and shapes["cos :: float32[]"] == 1
    assert sum(st.source_locations(closed).values()) == 8


def test_a_jaxpr_held_twice_counts_twice_unless_asked():
    j = plax.make_jaxpr(_inner)(1.0).jaxpr        # jit of [sin, mul]
    (call,) = j.eqns
    twice = Jaxpr(j.constvars, j.invars, j.outvars, [call, call.replace()])
    assert st.count_eqns(twice) == 6
    assert st.count_eqns(twice, revisit_inner_jaxprs=False) == 4
    assert st.primitives(twice) == {"jit": 2, "sin": 2, "mul": 2}


def test_source_locations_name_the_user_lines():
    where = st.primitives_by_source(_closed())
    file = __file__
    assert where[f"sin @ {file}:{_line_of('# line A')}:11 (_inner)"] == 1
    assert where[f"cos @ {file}:{_line_of('# line C')}:11 (_outer)"] == 1


def test_nested_equations_carry_their_callers_frames():
    eqns = list(st.all_eqns_with_traceback(_closed().jaxpr, None, set()))
    by_name = {e.primitive.name: tb for tb, e in eqns}
    cond_tb, jit_tb, sin_tb = by_name["cond"], by_name["jit"], by_name["sin"]
    assert [f.line_num for f in cond_tb.frames] == [_line_of("# line B")]
    assert [f.line_num for f in sin_tb.frames] == \
        [_line_of("# line A"), _line_of("# line B")]
    assert sin_tb[1:] == jit_tb          # the jit's own frame is its caller's: kept once
    codes, _ = sin_tb.raw_frames()
    assert [c.co_name for c in codes] == ["_inner", "_outer"]


def test_traceback_values():
    info = _closed().jaxpr.eqns[0].source_info
    tb = traceback_of(info)
    assert len(tb + tb) == 2 and (tb + tb)[:1] == tb and hash(tb) == hash(traceback_of(info))
    assert traceback_of(None) is None
    code, lasti = info.position
    assert Traceback.code_addr2line(code, lasti) == info.line
    with pytest.raises(TypeError, match="sliced"):
        tb[0]


def test_pprof_profile_decodes():
    profile = gzip.decompress(st.pprof_equation_profile(_closed().jaxpr))
    decoded = json.loads(xla.jaxlib_submodule("_jax").pprof_profile_to_json(profile))
    strings = decoded["stringTable"]
    assert strings[0] == "" and strings[int(decoded["comment"][0])].startswith("_outer at ")
    labels = sorted(strings[int(s["label"][0]["str"])] for s in decoded["sample"])
    assert labels == sorted(st.primitives(_closed()))
    names = {strings[int(f["name"])] for f in decoded["function"]}
    assert any(n.endswith("._inner") for n in names) and any(n.endswith("._outer") for n in names)


def test_pprof_varints():
    assert st._varint(1) == b"\x01" and st._varint(300) == b"\xac\x02"
    assert st._packed_field(13, [10]) == b"\x6a\x01\x0a"


def test_var_defs_and_refs():
    closed = plax.make_jaxpr(lambda x: jnp.sin(x) + x)(1.0)
    (jaxpr, table) = st.var_defs_and_refs(closed)
    x, sin_out, add_out = (v for v, _, _ in table)
    refs = {v: [e.primitive.name if e else None for e in r] for v, _, r in table}
    assert refs[x] == ["sin", "add"] and refs[sin_out] == ["add"] and refs[add_out] == [None]


def test_html_page_holds_the_lines_and_their_stacks():
    page = jaxpr_to_html(_closed())
    assert page.startswith("<!DOCTYPE html>") and '<div id="jaxpr-container">' in page
    packed = re.search(r'const base64Data = "([^"]+)";', page).group(1)
    data = json.loads(gzip.decompress(base64.b64decode(packed)))
    assert len(data["lines"]) == len(str(_closed().jaxpr).split("\n"))
    spans = re.findall(r'<span class="eqn" data-tb="(\d+)">([^<]*)</span>', "".join(data["lines"]))
    sin_node = next(int(n) for n, text in spans if "= sin " in text)
    chain = []
    while sin_node is not None:
        frame = data["frames"][data["dag"][sin_node]["frame"]]
        chain.append((data["strings"][frame["function"]], frame["line"]))
        sin_node = data["dag"][sin_node]["parent"]
    assert chain == [("_inner", _line_of("# line A")), ("_outer", _line_of("# line B"))]
    inner = str(data["strings"].index("_inner"))
    assert data["string_to_lines"][inner] == \
        [i for i, line in enumerate(data["lines"]) if "= sin" in line or "= mul" in line]


@pytest.mark.parametrize("fun", [st.primitives, st.count_eqns, jaxpr_to_html])
def test_bad_input(fun):
    with pytest.raises(TypeError, match="expected a Jaxpr or ClosedJaxpr"):
        fun("not a jaxpr")
