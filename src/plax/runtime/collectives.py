"""The collectives in a compiled program's HLO text: which communication XLA's partitioner
inserted, how much each moves, the device groups and the mesh axes they span, and the plax
source line each comes from (``Compiled.collectives()``, ``plax.debug.explain_sharding``).
"""
from __future__ import annotations

import functools
import itertools
import math
import re
from typing import NamedTuple

import numpy as np


# --- collectives in compiled HLO --------------------------------------------------------------
class Collective(NamedTuple):
    """One collective of a compiled program."""
    kind: str             # all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute
    shape: tuple          # of its result on each device (a tuple of shapes for a tuple result)
    dtype: str            # HLO element type(s), e.g. f32
    bytes: int            # size of its result on each device
    replica_groups: str   # the device groups that communicate (as XLA writes them)
    source: str           # "file:line" of the plax operation it came from ('' if unknown)
    # The groups of partition ids (positions in the mesh) that communicate, read from any
    # of XLA's forms (for a collective-permute: the (source, target) pairs); None if unread.
    groups: tuple | None = None
    # The mesh axes (by the mesh's own names) those groups span, or None when they are not
    # the groups of a set of axes (or no mesh was given).
    axes: tuple | None = None


_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
# Compiled on first use (by _pattern): loading this module costs no regex compiles.
_PATTERNS = {
    "op": r"=\s*(?P<type>.+?)\s+(?P<kind>" + "|".join(_KINDS) + r")(?:-start)?\(",
    "array": r"(\w+)\[([\d,]*)\]",
    "groups": r"(?:replica_groups|source_target_pairs)=(.*?)(?=, (?!device_ids)[a-z_]+=|$)",
    "iota": r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?$",
    "mesh_form": r"mesh\[(?P<axes>[^\]]*)\](?:, device_ids=\((?P<ids>[^)]*\)?)\))?"
                 r"\s*(?:\{(?P<chosen>[^}]*)\})?$",
    "source": r'source_file="([^"]*)"\s+source_line=(\d+)',
    "frame": r"stack_frame_id=(\d+)",
}
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
          "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16,
          "f8e4m3fn": 1, "f8e5m2": 1, "s4": 1, "u4": 1}


@functools.cache
def _pattern(name: str) -> re.Pattern:
    return re.compile(_PATTERNS[name])


def _stack_frames(hlo_text: str) -> dict:
    """stack frame id -> "file:line", from the tables XLA prints after the module."""
    sections, current = {}, None
    for line in hlo_text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = sections.setdefault(line, {})
        elif current is not None and line[:1].isdigit():
            key, _, value = line.partition(" ")
            current[int(key)] = value
        elif not line.strip():
            continue
        else:
            current = None
    files = {k: v.strip('"') for k, v in sections.get("FileNames", {}).items()}
    locations = {}
    for k, v in sections.get("FileLocations", {}).items():
        fields = dict(re.findall(r"(\w+)=(\d+)", v))
        locations[k] = f"{files.get(int(fields.get('file_name_id', 0)), '?')}:{fields.get('line')}"
    frames = {}
    for k, v in sections.get("StackFrames", {}).items():
        fields = dict(re.findall(r"(\w+)=(\d+)", v))
        frames[k] = locations.get(int(fields.get("file_location_id", 0)), "")
    return frames


def collectives_of(hlo_text: str, mesh=None) -> list:
    """The collectives in XLA's HLO text of a compiled program, in program order; with the
    program's ``mesh``, each names the mesh axes it communicates over."""
    found = []
    frames = _stack_frames(hlo_text)
    for line in hlo_text.splitlines():
        m = _pattern("op").search(line)
        if m is None or "-done" in line.split("=")[0]:
            continue
        arrays = _pattern("array").findall(m.group("type"))
        shapes = [tuple(int(d) for d in dims.split(",") if d) for _, dims in arrays]
        dtype = ",".join(dict.fromkeys(t for t, _ in arrays)) or "?"
        shape = shapes[0] if len(shapes) == 1 else tuple(shapes)
        size = sum(_BYTES.get(t, 4) * int(np.prod(s or [1])) for (t, _), s in zip(arrays, shapes))
        groups = _pattern("groups").search(line)
        source, frame = _pattern("source").search(line), _pattern("frame").search(line)
        where = f"{source.group(1)}:{source.group(2)}" if source else \
            frames.get(int(frame.group(1)), "") if frame else ""
        text = groups.group(1) if groups else ""
        devices = getattr(mesh, "devices", None)  # (a concrete mesh's)
        listed = _read_groups(text, None if devices is None else devices.size)
        found.append(Collective(m.group("kind"), shape, dtype, size, text, where, listed,
                                _axes_of(listed, m.group("kind"), mesh)))
    return found


# --- which mesh axes a collective's device groups span ------------------------------------------
def _iota(dims, shape, perm=None) -> np.ndarray:
    ids = np.arange(math.prod(shape)).reshape(shape)
    return (ids.transpose(perm) if perm else ids).reshape(dims)


def _ints(text: str) -> list:
    return [int(v) for v in text.split(",") if v]


def _read_groups(text: str, n):
    """The partition-id groups XLA's text describes, as a tuple of tuples (None if its form
    is not one of those read here); ``n``: the number of partitions, if known."""
    try:
        groups = _groups(text, n)
    except (ValueError, IndexError, AttributeError):
        return None
    return None if groups is None else tuple(tuple(int(i) for i in g) for g in groups)


def _groups(text: str, n):
    text = text.strip()
    if text in ("", "{}"):
        return None if n is None else [list(range(n))]  # no groups: every device together
    if text.startswith("{"):
        return [_ints(g) for g in re.findall(r"\{([\d,]*)\}", text[1:-1])]
    iota = _pattern("iota").match(text)
    if iota:
        dims, shape, perm = (_ints(g) if g else None for g in iota.groups())
        return _iota(dims, shape, perm).tolist()
    form = _pattern("mesh_form").match(text)
    if form is None:
        return None
    names, sizes = zip(*[(a, int(s)) for a, s in re.findall(r"'([^']+)'=(\d+)",
                                                             form.group("axes"))])
    ids = form.group("ids")
    if ids is None:
        grid = np.arange(math.prod(sizes)).reshape(sizes)
    elif ids.startswith("["):  # an iota: [shape]T(perm)
        shape, _, perm = re.match(r"\[([\d,]+)\](T\(([\d,]+)\))?", ids).groups()
        grid = _iota(sizes, _ints(shape), _ints(perm) if perm else None)
    else:
        grid = np.array(_ints(ids)).reshape(sizes)
    chosen = form.group("chosen")
    if chosen is None:
        return None
    # Each chosen axis, whole or a sub-axis 'a':(pre)size: the middle factor when the axis
    # is split as [pre, size, the rest].
    parts = {names.index(a): (int(pre), int(size)) if size else None
             for a, pre, size in re.findall(r"'([^']+)'(?::\((\d+)\)(\d+))?", chosen)}
    dims, picked = [], []
    for i, length in enumerate(sizes):
        if i in parts and parts[i] is not None:
            pre, size = parts[i]
            picked.append(len(dims) + 1)
            dims += [pre, size, length // (pre * size)]
        else:
            if i in parts:
                picked.append(len(dims))
            dims.append(length)
    rest = [d for d in range(len(dims)) if d not in picked]
    size = math.prod(dims[d] for d in picked)
    return grid.reshape(dims).transpose(rest + picked).reshape(-1, size).tolist()


def _axes_of(groups, kind: str, mesh):
    """The axes of ``mesh`` (in its order) that a collective's groups (or, for a
    collective-permute, its source-target pairs) span; None if they are no set of axes."""
    if getattr(mesh, "devices", None) is None or not mesh.axis_names or not groups:
        return None
    names, shape = tuple(mesh.axis_names), tuple(mesh.devices.shape)
    positions = np.arange(math.prod(shape)).reshape(shape)
    if any(i >= positions.size for g in groups for i in g):
        return None
    if kind == "collective-permute":  # the axes along which sources and targets differ
        moved = set()
        for pair in groups:
            if len(pair) != 2:
                return None
            a, b = (np.unravel_index(p, shape) for p in pair)
            moved |= {names[i] for i in range(len(shape)) if a[i] != b[i]}
        return tuple(n for n in names if n in moved) or None
    wanted = {frozenset(g) for g in groups}
    for k in range(1, len(names) + 1):
        for picked in itertools.combinations(range(len(names)), k):
            rest = [i for i in range(len(names)) if i not in picked]
            size = math.prod(shape[i] for i in picked)
            spans = positions.transpose(rest + list(picked)).reshape(-1, size)
            if {frozenset(g) for g in spans.tolist()} == wanted:
                return tuple(names[i] for i in picked)
    return None
