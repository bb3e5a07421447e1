"""``jax._src.lax.windowed_reductions``: plax's windowed reductions
(``plax.higher_order.windowed``) and binders of its ``select_and_gather_add`` and
``select_and_scatter_add`` primitives with JAX's positional parameters."""
from plax.higher_order import windowed as _windowed
from plax.higher_order.windowed import (reduce_window, select_and_gather_add_p,  # noqa: F401
                                        select_and_scatter_add_p)

from plax._src import _face

__getattr__ = _face.face_getattr(__name__, {}, _windowed)


def _select_and_gather_add(tangents, operand, select_prim, window_dimensions, window_strides,
                           padding, base_dilation, window_dilation):
    """Per window, the tangent at the operand's selected (max for ge_p) element."""
    return select_and_gather_add_p.bind(
        tangents, operand, select_prim=select_prim, window_dimensions=tuple(window_dimensions),
        window_strides=tuple(window_strides), padding=tuple(map(tuple, padding)),
        base_dilation=tuple(base_dilation), window_dilation=tuple(window_dilation))


def _select_and_scatter_add(source, operand, select_prim, window_dimensions, window_strides,
                            padding):
    """``source`` added into each window's selected element of ``operand``'s shape."""
    return select_and_scatter_add_p.bind(
        source, operand, select_prim=select_prim, window_dimensions=tuple(window_dimensions),
        window_strides=tuple(window_strides), padding=tuple(map(tuple, padding)))
