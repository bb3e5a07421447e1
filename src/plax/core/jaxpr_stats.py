"""Statistics of jaxprs (``jax._src.jaxpr_util``): their equations, nested ones included,
counted by primitive, source line or output types; the tracebacks equations came from; a
pprof profile of where equations were staged.

Each equation records one user frame (``SourceInfo.position``); an equation inside a nested
jaxpr (a ``jit``'s, a ``cond`` branch's) gets the frames of the equations enclosing it after
its own, so that its traceback reads from the user line that staged it out to the top-level
call. (An equation that library code staged inside a nested jaxpr records the line that
called the library, the enclosing equation's own frame: that frame is kept once.)"""
from __future__ import annotations

import gzip
import itertools
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator

from plax.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, open_jaxpr, subjaxprs
from plax.core.source_info import Traceback, is_plax_code, traceback_of


def _open(jaxpr) -> Jaxpr:
    if not isinstance(jaxpr, (Jaxpr, ClosedJaxpr)):
        raise TypeError(f"expected a Jaxpr or ClosedJaxpr, got {type(jaxpr).__name__}")
    return open_jaxpr(jaxpr)


def _subjaxprs(jaxpr: Jaxpr) -> Iterator[Jaxpr]:
    for eqn in jaxpr.eqns:
        for sub in subjaxprs(eqn.params):
            yield open_jaxpr(sub)


def all_eqns(jaxpr, revisit_inner_jaxprs: bool = True) -> Iterator[tuple[Jaxpr, JaxprEqn]]:
    """``(jaxpr, eqn)`` for every equation of ``jaxpr`` and of the jaxprs nested in it (a
    jaxpr nested twice is visited twice unless ``revisit_inner_jaxprs`` is False)."""
    seen = None if revisit_inner_jaxprs else set()
    stack = [_open(jaxpr)]
    while stack:
        j = stack.pop()
        for eqn in j.eqns:
            yield j, eqn
        subs = []
        for sub in _subjaxprs(j):
            if seen is None:
                subs.append(sub)
            elif sub not in seen:
                seen.add(sub)
                subs.append(sub)
        stack.extend(reversed(subs))


def all_eqns_with_traceback(jaxpr, caller_tb: Traceback | None, visited: set):
    """``(traceback, eqn)`` for every equation, nested ones after the equation holding them,
    each traceback followed by ``caller_tb`` and those of the enclosing equations. A nested
    jaxpr in ``visited`` is skipped (and each visited one is added)."""
    for eqn in _open(jaxpr).eqns:
        tb = traceback_of(eqn.source_info)
        if caller_tb is not None:
            tb = caller_tb if tb is None or tb == caller_tb[:1] else tb + caller_tb
        yield tb, eqn
        for sub in subjaxprs(eqn.params):
            sub = open_jaxpr(sub)
            if sub not in visited:
                visited.add(sub)
                yield from all_eqns_with_traceback(sub, tb, visited)


def count_eqns(jaxpr, revisit_inner_jaxprs: bool = True) -> int:
    """The number of equations of ``jaxpr``, nested ones included."""
    return sum(1 for _ in all_eqns(jaxpr, revisit_inner_jaxprs))


def histogram(jaxpr, key: Callable, key_fmt: Callable = lambda k: k) -> dict:
    """``{key_fmt(key(eqn)): number of equations}`` over all equations."""
    counts: dict = {}
    for _, eqn in all_eqns(jaxpr):
        k = key_fmt(key(eqn))
        counts[k] = counts.get(k, 0) + 1
    return counts


def _where(eqn: JaxprEqn) -> str:
    info = eqn.source_info
    return info.location() if info is not None else ""


def primitives(jaxpr) -> dict:
    """Equations counted by primitive name."""
    return histogram(jaxpr, lambda eqn: eqn.primitive.name)


def primitives_by_source(jaxpr) -> dict:
    """Equations counted by ``'<primitive> @ <file:line:column (function)>'``."""
    return histogram(jaxpr, lambda eqn: f"{eqn.primitive.name} @ {_where(eqn)}")


def primitives_by_shape(jaxpr) -> dict:
    """Equations counted by ``'<primitive> :: <output types>'`` (``add :: float32[]``)."""
    def key(eqn):
        outs = " ".join(_long_type(v.aval) for v in eqn.outvars)
        return f"{eqn.primitive.name} :: {outs}"
    return histogram(jaxpr, key)


def _long_type(aval) -> str:
    """``float32[2]``: a type with its dtype's full name, as JAX's histograms show it."""
    try:
        return aval.str_short(short_dtypes=False)
    except TypeError:  # a type without dtype names (the effect token's)
        return aval.str_short()


def source_locations(jaxpr) -> dict:
    """Equations counted by the user source location they were staged from."""
    return histogram(jaxpr, _where)


def var_defs_and_refs(jaxpr):
    """``(jaxpr, [(var, defining eqn or None, [eqns using it; None: the outputs]), ...])``
    for ``jaxpr``, as a list with one entry more per nested jaxpr when it has some."""
    j = _open(jaxpr)
    defs: dict = {}
    refs: dict = {}
    for v in [*j.constvars, *j.invars]:
        defs[v], refs[v] = None, []
    for eqn in j.eqns:
        for a in eqn.invars:
            if not isinstance(a, Literal):
                refs[a].append(eqn)
        for v in eqn.outvars:
            defs[v], refs[v] = eqn, []
    for a in j.outvars:
        if not isinstance(a, Literal):
            refs[a].append(None)
    own = (j, [(v, defs[v], refs[v]) for v in defs])
    subs = [var_defs_and_refs(s) for s in _subjaxprs(j)]
    return [own, *subs] if subs else own


# --- pprof -------------------------------------------------------------------
# The few fields of pprof's Profile message (github.com/google/pprof proto/profile.proto)
# written by hand: a message is a sequence of (field number, value) with varints and
# length-delimited bytes.

def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _int_field(number: int, n: int) -> bytes:
    return _varint(number << 3) + _varint(n)


def _bytes_field(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _packed_field(number: int, values) -> bytes:
    return _bytes_field(number, b"".join(_varint(v) for v in values))


def _strip_root(filename: str, root: str) -> str:
    i = filename.rfind(root)
    return filename[i + len(root):] if i >= 0 else filename


def _canonical_filename(filename: str, workspace_root: str | None) -> str:
    if workspace_root is not None:
        return _strip_root(filename, workspace_root)
    from plax.core.config import config
    pattern = config.read("jax_hlo_source_file_canonicalization_regex")
    return re.sub(pattern, "", filename) if pattern else filename


def pprof_profile(profile: dict, workspace_root: str | None = None, *, sample_type: str,
                  sample_unit: str, comment: str = "") -> bytes:
    """A gzipped pprof Profile of ``{(traceback or None, primitive): count}``: a sample per
    entry at the traceback's user frames, labelled with the primitive's name."""
    strings = defaultdict(itertools.count().__next__)
    functions = defaultdict(itertools.count(1).__next__)
    locations = defaultdict(itertools.count(1).__next__)
    strings[""]  # noqa: B018 (string 0 is the empty string)
    label_key = strings["primitive"]
    samples = []
    for (tb, primitive), count in profile.items():
        codes, lastis = tb.raw_frames() if tb is not None else ([], [])
        ids = [locations[(c, i)] for c, i in zip(codes, lastis) if not is_plax_code(c)]
        label = _int_field(1, label_key) + _int_field(2, strings[primitive.name])
        samples.append(_packed_field(1, ids) + _packed_field(2, [count])
                       + _bytes_field(3, label))
    location_msgs = []
    for (code, lasti), loc_id in list(locations.items()):
        line = _int_field(1, functions[code]) + \
            _int_field(2, Traceback.code_addr2line(code, lasti) or 0)
        location_msgs.append(_int_field(1, loc_id) + _bytes_field(4, line))
    function_msgs = []
    for code, func_id in list(functions.items()):
        filename = _canonical_filename(code.co_filename, workspace_root)
        name = f"{filename.removesuffix('.py').replace('/', '.')}.{code.co_qualname}"
        function_msgs.append(_int_field(1, func_id) + _int_field(2, strings[name])
                             + _int_field(4, strings[filename])
                             + _int_field(5, code.co_firstlineno))
    value_type = _int_field(1, strings[sample_type]) + _int_field(2, strings[sample_unit])
    comment_id = strings[comment]
    msg = b"".join([
        _bytes_field(1, value_type),
        *(_bytes_field(2, s) for s in samples),
        *(_bytes_field(4, loc) for loc in location_msgs),
        *(_bytes_field(5, f) for f in function_msgs),
        *(_bytes_field(6, s.encode("utf-8")) for s in strings),
        _packed_field(13, [comment_id]),
    ])
    return gzip.compress(msg)


def pprof_equation_profile(jaxpr, *, workspace_root: str | None = None) -> bytes:
    """A gzipped pprof profile counting ``jaxpr``'s equations (nested ones included) by the
    user stack that staged them, labelled by primitive (view with ``pprof``). Its comment
    names the user function the first equation was staged from."""
    j = _open(jaxpr)
    counts = Counter((tb, eqn.primitive)
                     for tb, eqn in all_eqns_with_traceback(j, None, set()))
    comment = ""
    first = next((e.source_info for e in j.eqns
                  if e.source_info is not None and e.source_info.position is not None), None)
    if first is not None:
        code = first.position[0]
        comment = (f"{code.co_name} at "
                   f"{_canonical_filename(code.co_filename, workspace_root)}:"
                   f"{code.co_firstlineno}")
    return pprof_profile(counts, workspace_root, sample_type="equations",
                         sample_unit="count", comment=comment)
