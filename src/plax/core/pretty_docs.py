"""Documents and their layout: a Wadler/Lindig pretty-printer (JAX's ``pretty_printer``).

A document is built from text, concatenation, breaks, groups, nesting, colours and source
maps. ``Doc.format`` lays it out in two passes:

- layout: a break prints as its text when the innermost group around it fits flat in what is
  left of the line (only the group itself is measured, as in Lindig's strict printer), else
  as a newline indented by the nesting in force; a break in no group is always a newline.
  Text is measured by its length, newlines inside text included;
- rendering: the lines as plain text, with ANSI colours, or as HTML (escaped text, colours as
  ``<span class="ansi-...">``, anchors and links as ``<a>``). Annotations of a line's texts
  follow the line, dimmed, in one column past the longest line; the second and later ones
  of a line each go on a line of their own. With ``source_map``, each layout line gets the
  ``(start, end, source)`` column ranges of the output that each innermost source-mapped
  document produced; colours are closed at the ends of each range so that a range is
  self-contained markup.
"""
from __future__ import annotations

import enum
import sys
from collections.abc import Sequence
from typing import Any


class _Enum(enum.Enum):
    def __repr__(self):
        return f"{type(self).__name__}.{self.name}"


class Color(_Enum):
    """ANSI foreground colours (their SGR codes; backgrounds are 10 more)."""
    BLACK = 30
    RED = 31
    GREEN = 32
    YELLOW = 33
    BLUE = 34
    MAGENTA = 35
    CYAN = 36
    WHITE = 37
    RESET = 39


class Intensity(_Enum):
    """ANSI intensities (their SGR codes)."""
    DIM = 2
    NORMAL = 22
    BRIGHT = 1


class OutputFormat(_Enum):
    """What ``Doc.format`` produces: plain text (ANSI colours) or HTML."""
    TEXT = 0
    HTML = 1


# A style: (foreground, background, intensity); None is the terminal's default colour.
_PLAIN = (None, None, Intensity.NORMAL)
_DIMMED = (None, None, Intensity.DIM)


class Doc:
    """A document (abstract): build one with ``text``, ``concat``, ``brk``, ``group``,
    ``nest``, ``color``, ``source_map``."""
    __slots__ = ()

    def __new__(cls, *args, **kwargs):
        if cls is Doc:
            raise TypeError("Doc is abstract and cannot be instantiated")
        return super().__new__(cls)

    def __add__(self, other: Doc) -> Doc:
        if not isinstance(other, Doc):
            raise TypeError(f"a Doc can only be concatenated with a Doc, not "
                            f"{type(other).__name__}")
        return _Concat((self, other))

    def __str__(self) -> str:
        return self.format()

    def format(self, width: int = 80, *, use_color: bool | None = None,
               output_format: OutputFormat | None = None, separable_lines: bool = False,
               annotation_prefix: str = " # ",
               source_map: list[list[tuple[int, int, Any]]] | None = None) -> str:
        """The document laid out in ``width`` columns, as text or HTML (``output_format``),
        coloured when ``use_color`` (default: when stdout is a terminal and the
        ``jax_pprint_use_color`` flag is on). With ``separable_lines`` every line closes its
        colours, so that each stands alone. ``source_map``, a list, gets one list per layout
        line of ``(start column, end column, source)`` ranges."""
        if not isinstance(width, int) or isinstance(width, bool):
            raise TypeError(f"format: width must be an int, got {type(width).__name__}")
        if output_format is None:
            output_format = OutputFormat.TEXT
        if not isinstance(output_format, OutputFormat):
            raise TypeError(f"format: output_format must be an OutputFormat, got "
                            f"{output_format!r}")
        if not isinstance(annotation_prefix, str):
            raise TypeError("format: annotation_prefix must be a str")
        if use_color is None:
            use_color = _default_use_color()
        lines = _layout(self, width)
        renderer = _Renderer(html=output_format is OutputFormat.HTML, use_color=bool(use_color),
                             separable=bool(separable_lines), prefix=annotation_prefix,
                             want_map=source_map is not None)
        text, ranges = renderer.render(lines)
        if source_map is not None:
            source_map.extend(ranges)
        return text


def _default_use_color() -> bool:
    from plax.core.config import config
    isatty = getattr(sys.stdout, "isatty", None)
    return bool(isatty and isatty()) and bool(config.read("jax_pprint_use_color"))


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Nil(Doc):
    __slots__ = ()

    def __repr__(self):
        return "nil"


class _Text(Doc):
    __slots__ = ("text", "annotation", "anchor", "href")

    def __init__(self, text, annotation, anchor, href):
        self.text, self.annotation, self.anchor, self.href = text, annotation, anchor, href

    def __repr__(self):
        extra = "".join(f", {k}={_quote(v)}" for k, v in (
            ("annotation", self.annotation), ("anchor", self.anchor), ("href", self.href))
            if v is not None)
        return f"text({_quote(self.text)}{extra})"


class _Concat(Doc):
    __slots__ = ("children",)

    def __init__(self, children):
        self.children = tuple(children)

    def __repr__(self):
        return f"concat({', '.join(map(repr, self.children))})"


class _Break(Doc):
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return f"break({_quote(self.text)})"


class _Group(Doc):
    __slots__ = ("child",)

    def __init__(self, child):
        self.child = child

    def __repr__(self):
        return f"group({self.child!r})"


class _Nest(Doc):
    __slots__ = ("n", "child")

    def __init__(self, n, child):
        self.n, self.child = n, child

    def __repr__(self):
        return f"nest({self.n}, {self.child!r})"


class _Color(Doc):
    __slots__ = ("child", "foreground", "background", "intensity")

    def __init__(self, child, foreground, background, intensity):
        self.child = child
        self.foreground, self.background, self.intensity = foreground, background, intensity

    def __repr__(self):
        names = [None if c is None else c.name.lower()
                 for c in (self.foreground, self.background, self.intensity)]
        return f"color({self.child!r}, {names[0]}, {names[1]}, {names[2]})"


class _SourceMap(Doc):
    __slots__ = ("child", "source")

    def __init__(self, child, source):
        self.child, self.source = child, source

    def __repr__(self):
        return f"source({self.child!r}, {self.source!r})"


def _check_doc(what: str, doc) -> None:
    if not isinstance(doc, Doc):
        raise TypeError(f"{what}: expected a Doc, got {type(doc).__name__}")


def _check_str(what: str, value, optional: bool = True) -> None:
    if not (isinstance(value, str) or (optional and value is None)):
        raise TypeError(f"{what}: expected a str{' or None' if optional else ''}, got "
                        f"{type(value).__name__}")


_NIL = _Nil()


def nil() -> Doc:
    """The empty document."""
    return _NIL


def text(text: str, annotation: str | None = None, anchor: str | None = None,
         href: str | None = None) -> Doc:
    """Literal text; ``annotation`` is printed after its line, ``anchor``/``href`` make it
    an HTML anchor or link (HTML output only)."""
    _check_str("text", text, optional=False)
    for what, value in (("annotation", annotation), ("anchor", anchor), ("href", href)):
        _check_str(f"text: {what}", value)
    return _Text(text, annotation, anchor, href)


def concat(children: Sequence[Doc]) -> Doc:
    """The documents one after the other."""
    children = tuple(children)
    for child in children:
        _check_doc("concat", child)
    return _Concat(children)


def brk(text: str = " ") -> Doc:
    """A break: ``text`` when its group is laid out flat, else a newline."""
    _check_str("brk", text, optional=False)
    return _Break(text)


def group(doc: Doc) -> Doc:
    """Lay ``doc``'s breaks out flat if all of it fits on the line, else as newlines."""
    _check_doc("group", doc)
    return _Group(doc)


def nest(n: int, doc: Doc) -> Doc:
    """``doc`` with the indentation after its newlines increased by ``n``."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"nest: n must be an int, got {type(n).__name__}")
    _check_doc("nest", doc)
    return _Nest(n, doc)


def color(child: Doc, foreground: Color | None = None, background: Color | None = None,
          intensity: Intensity | None = None) -> Doc:
    """``child`` in the given colours (None keeps the enclosing one's); shown only when
    formatting with ``use_color``."""
    _check_doc("color", child)
    for what, value, kind in (("foreground", foreground, Color),
                              ("background", background, Color),
                              ("intensity", intensity, Intensity)):
        if value is not None and not isinstance(value, kind):
            raise TypeError(f"color: {what} must be a {kind.__name__} or None, got {value!r}")
    return _Color(child, foreground, background, intensity)


def source_map(doc: Doc, source: Any) -> Doc:
    """``doc``, whose output ranges ``format(source_map=...)`` reports as from ``source``
    (any object)."""
    _check_doc("source_map", doc)
    return _SourceMap(doc, source)


def type_annotation(child: Doc) -> Doc:
    """``child`` coloured as a type (magenta)."""
    return color(child, foreground=Color.MAGENTA, intensity=Intensity.NORMAL)


def keyword(child: Doc) -> Doc:
    """``child`` coloured as a keyword (bright blue)."""
    return color(child, foreground=Color.BLUE, intensity=Intensity.BRIGHT)


def join(sep: Doc, docs: Sequence[Doc]) -> Doc:
    """The documents ``docs`` with ``sep`` between each two."""
    docs = list(docs)
    if not docs:
        return nil()
    if len(docs) == 1:
        _check_doc("join", docs[0])
        return docs[0]
    parts = [docs[0]]
    for d in docs[1:]:
        parts += [sep, d]
    return concat(parts)


# --- layout ------------------------------------------------------------------

_END_SOURCE = object()  # on the layout stack: the end of a source-mapped document


def _fits(doc: Doc, room: int) -> bool:
    """Whether ``doc`` laid out flat takes at most ``room`` columns."""
    used, stack = 0, [doc]
    while stack:
        d = stack.pop()
        kind = type(d)
        if kind is _Text or kind is _Break:
            used += len(d.text)
            if used > room:
                return False
        elif kind is _Concat:
            stack.extend(d.children)
        elif kind is not _Nil:
            stack.append(d.child)
    return used <= room


class _Line:
    """A laid-out line: its indentation, its pieces (``(text, style, anchor, href)`` and
    source starts/ends), its texts' annotations, and its width."""
    __slots__ = ("indent", "pieces", "annotations", "width")

    def __init__(self, indent):
        self.indent, self.pieces, self.annotations, self.width = indent, [], [], indent


def _layout(doc: Doc, width: int) -> list:
    line = _Line(0)
    lines = [line]
    # (indent, flat, style, doc); a break outside every group is a newline
    stack: list = [(0, False, _PLAIN, doc)]
    while stack:
        item = stack.pop()
        if item is _END_SOURCE:
            line.pieces.append(_END_SOURCE)
            continue
        indent, flat, style, d = item
        kind = type(d)
        if kind is _Text:
            line.pieces.append((d.text, style, d.anchor, d.href))
            line.width += len(d.text)
            if d.annotation is not None:
                line.annotations.append(d.annotation)
        elif kind is _Concat:
            stack.extend((indent, flat, style, c) for c in reversed(d.children))
        elif kind is _Break:
            if flat:
                line.pieces.append((d.text, style, None, None))
                line.width += len(d.text)
            else:
                line = _Line(indent)
                lines.append(line)
        elif kind is _Group:
            stack.append((indent, flat or _fits(d.child, width - line.width), style, d.child))
        elif kind is _Nest:
            stack.append((indent + d.n, flat, style, d.child))
        elif kind is _Color:
            fg, bg, intensity = style
            if d.foreground is not None:
                fg = None if d.foreground is Color.RESET else d.foreground
            if d.background is not None:
                bg = None if d.background is Color.RESET else d.background
            if d.intensity is not None:
                intensity = d.intensity
            stack.append((indent, flat, (fg, bg, intensity), d.child))
        elif kind is _SourceMap:
            line.pieces.append(_SourceStart(d.source))
            stack.append(_END_SOURCE)
            stack.append((indent, flat, style, d.child))
    return lines


class _SourceStart:
    __slots__ = ("source",)

    def __init__(self, source):
        self.source = source


# --- rendering ---------------------------------------------------------------

_HTML_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;",
                               "'": "&apos;"})


class _Renderer:
    """Writes laid-out lines, tracking the colours in force and the source ranges."""

    def __init__(self, *, html, use_color, separable, prefix, want_map):
        self.html, self.use_color, self.separable = html, use_color, separable
        self.prefix, self.want_map = prefix, want_map
        self.style = _PLAIN   # the colours the output has switched to
        self.parts: list = []  # the current line's output
        self.pos = 0           # its length
        self.sources: list = []
        self.start = 0         # where the innermost source's range on this line began
        self.ranges: list = []

    def write(self, s: str) -> None:
        self.parts.append(s)
        self.pos += len(s)

    def switch(self, style) -> None:
        """Switch the output's colours to ``style`` (when colouring)."""
        old = self.style
        if old == style or not self.use_color:
            return
        self.style = style
        if self.html:
            if old != _PLAIN:
                self.write("</span>")
            if style != _PLAIN:
                fg, bg, intensity = style
                classes = ([f"ansi-fg-{fg.value}"] if fg is not None else []) + \
                    ([f"ansi-bg-{bg.value + 10}"] if bg is not None else []) + \
                    ([f"ansi-intensity-{intensity.value}"]
                     if intensity is not Intensity.NORMAL else [])
                self.write(f'<span class="{" ".join(classes)}">')
            return
        codes = []
        if old[0] != style[0]:
            codes.append(str(style[0].value if style[0] is not None else 39))
        if old[1] != style[1]:
            codes.append(str(style[1].value + 10 if style[1] is not None else 49))
        if old[2] != style[2]:
            codes.append(str(style[2].value))
        self.write(f"\x1b[{';'.join(codes)}m")

    def end_range(self) -> None:
        """Close the colours and end the innermost source's range here."""
        self.switch(_PLAIN)
        if self.sources and self.pos > self.start:
            self.ranges[-1].append((self.start, self.pos, self.sources[-1]))
        self.start = self.pos

    def text(self, piece) -> None:
        s, style, anchor, href = piece
        self.switch(style)
        if not self.html:
            self.write(s)
            return
        s = s.translate(_HTML_ESCAPES)
        if anchor is None and href is None:
            self.write(s)
            return
        attrs = (f' id="{anchor}"' if anchor is not None else "") + \
            (f' href="{href}"' if href is not None else "")
        self.write(f"<a{attrs}>{s}</a>")

    def render(self, lines: list):
        column = max(line.width for line in lines)
        out = []
        for i, line in enumerate(lines):
            self.parts, self.pos = [], 0
            self.ranges.append([])
            self.write(" " * line.indent)
            self.start = self.pos
            for piece in line.pieces:
                if type(piece) is tuple:
                    self.text(piece)
                elif self.want_map:
                    self.end_range()
                    if piece is _END_SOURCE:
                        self.sources.pop()
                    else:
                        self.sources.append(piece.source)
                elif piece is _END_SOURCE:
                    self.sources.pop()
                else:
                    self.sources.append(piece.source)
            if self.want_map and self.sources:
                self.end_range()
            if self.separable or line.annotations:
                self.switch(_PLAIN)
            for j, note in enumerate(line.annotations):
                if j:
                    self.write("\n")
                pad = column - line.width if j == 0 else column
                self.switch(_DIMMED)
                self.write(" " * pad + self.prefix + note)
                self.switch(_PLAIN)
            if i == len(lines) - 1:
                self.switch(_PLAIN)
            out.append("".join(self.parts))
        return "\n".join(out), self.ranges
