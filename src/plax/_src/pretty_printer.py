"""``jax._src.pretty_printer``: documents and their layout (Wadler/Lindig), as
``plax.core.pretty_docs`` provides them."""
from plax.core.pretty_docs import (Color, Doc, Intensity, OutputFormat, brk, color,  # noqa: F401
                                   concat, group, join, keyword, nest, nil, source_map, text,
                                   type_annotation)
