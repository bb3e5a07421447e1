"""plax.core.pretty_docs: layout of groups, breaks and nesting; annotations; ANSI and HTML
colours; anchors; source maps."""
import pytest

from plax.core import pretty_docs as pd

t, brk, group, nest = pd.text, pd.brk, pd.group, pd.nest
RED, BLUE = pd.Color.RED, pd.Color.BLUE
HTML = pd.OutputFormat.HTML

LAYOUT = [
    # (document, width, expected)
    (t("ab") + brk() + t("c"), 80, "ab\nc"),                      # a break in no group
    (group(t("ab") + brk() + t("c")), 4, "ab c"),
    (group(t("ab") + brk() + t("c")), 3, "ab\nc"),
    (group(t("ab") + brk("|") + t("c")), 80, "ab|c"),
    (group(t("ab") + brk()) + t("long tail"), 3, "ab long tail"),          # only the group measured
    (nest(3, group(t("a") + brk() + t("b"))), 1, "a\n   b"),
    (group(t("aaa") + nest(2, brk() + group(t("bb") + brk() + t("cc")))), 7, "aaa\n  bb cc"),
    (group(t("a") + nest(2, brk() + group(t("bbb") + brk() + t("ccc")))), 6,
     "a\n  bbb\n  ccc"),
    (t("abcd\n") + group(t("x") + brk() + t("y")), 7, "abcd\nx\ny"),  # text measured by length
    (pd.join(t(",") + brk(), [t("p"), t("q"), t("r")]), 80, "p,\nq,\nr"),
    (group(pd.join(t(",") + brk(), [t("p"), t("q")])), 80, "p, q"),
    (pd.join(t(","), []), 80, ""),
    (pd.nil() + t(""), 0, ""),
]


@pytest.mark.parametrize("doc,width,expected", LAYOUT)
def test_layout(doc, width, expected):
    assert doc.format(width=width, use_color=False) == expected


def test_annotations_align_past_the_longest_line():
    doc = t("a", annotation="A1") + t("b", annotation="A2") + brk() + t("cccc")
    assert doc.format(width=0, use_color=False) == "ab   # A1\n     # A2\ncccc"
    assert doc.format(width=0, use_color=False, annotation_prefix="--") == \
        "ab  --A1\n    --A2\ncccc"


COLORED = [
    # (document, options, expected)
    (pd.keyword(t("let")) + t(" ") + pd.type_annotation(t("x")), {},
     "\x1b[34;1mlet\x1b[39;22m \x1b[35mx\x1b[39m"),
    (pd.color(t("a") + pd.color(t("b"), background=BLUE) + t("c"), foreground=RED), {},
     "\x1b[31ma\x1b[44mb\x1b[49mc\x1b[39m"),
    (pd.color(t("a") + brk() + t("b"), foreground=RED), {"width": 0},
     "\x1b[31ma\nb\x1b[39m"),
    (pd.color(t("a") + nest(1, brk() + t("b")), foreground=RED),
     {"width": 0, "separable_lines": True}, "\x1b[31ma\x1b[39m\n \x1b[31mb\x1b[39m"),
    (pd.color(t("a", annotation="n"), foreground=RED), {}, "\x1b[31ma\x1b[39m\x1b[2m # n\x1b[22m"),
    (pd.keyword(t("a<")) + t(" ") + t("b"), {"output_format": HTML},
     '<span class="ansi-fg-34 ansi-intensity-1">a&lt;</span> b'),
    (pd.color(t("a") + brk() + t("b"), foreground=RED),
     {"output_format": HTML, "width": 0, "separable_lines": True},
     '<span class="ansi-fg-31">a</span>\n<span class="ansi-fg-31">b</span>'),
    (t("a", annotation="n") + brk() + t("bc"), {"output_format": HTML, "width": 0},
     'a<span class="ansi-intensity-2">  # n</span>\nbc'),
    (pd.color(t("x"), foreground=RED), {"use_color": False}, "x"),
]


@pytest.mark.parametrize("doc,options,expected", COLORED)
def test_colors(doc, options, expected):
    options = {"use_color": True, **options}
    assert doc.format(**options) == expected


def test_html_escapes_text_and_wraps_anchors():
    doc = t("d&", anchor="v_a") + t(" ") + t("'u'", href="#v_a")
    assert doc.format(output_format=HTML, use_color=False) == \
        '<a id="v_a">d&amp;</a> <a href="#v_a">&apos;u&apos;</a>'
    assert doc.format(use_color=False) == "d& 'u'"


def test_source_map_ranges_per_line():
    doc = pd.concat([t("ab"), pd.source_map(t("c") + pd.source_map(t("d"), "in") + t("e"), "out"),
                     nest(2, pd.source_map(brk() + t("fg"), 7))])
    ranges = []
    assert doc.format(width=0, source_map=ranges) == "abcde\n  fg"
    assert ranges == [[(2, 3, "out"), (3, 4, "in"), (4, 5, "out")], [(2, 4, 7)]]


def test_source_map_ranges_hold_their_colours():
    doc = pd.color(t("a") + pd.source_map(t("b"), 1), foreground=RED)
    ranges = []
    out = doc.format(use_color=True, source_map=ranges)
    (start, end, source), = ranges[0]
    assert source == 1 and out[start:end] == "\x1b[31mb\x1b[39m"
    assert out == "\x1b[31ma\x1b[39m\x1b[31mb\x1b[39m"


@pytest.mark.parametrize("make,match", [
    (lambda: pd.text(3), "expected a str"),
    (lambda: pd.nest(1.5, t("x")), "n must be an int"),
    (lambda: pd.concat([t("x"), "y"]), "expected a Doc"),
    (lambda: t("x") + "y", "concatenated with a Doc"),
    (lambda: pd.color(t("x"), foreground=31), "must be a Color"),
    (lambda: pd.Doc(), "abstract"),
    (lambda: t("x").format(width="80"), "width must be an int"),
])
def test_bad_input(make, match):
    with pytest.raises(TypeError, match=match):
        make()


def test_repr_and_str():
    assert repr(group(t("a") + brk())) == 'group(concat(text("a"), break(" ")))'
    assert repr(pd.Color.RED) == "Color.RED"
    assert str(group(t("a") + brk() + t("b"))) == "a b"
