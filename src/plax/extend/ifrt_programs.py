"""``plax.extend.ifrt_programs``: jaxlib's builders of IFRT programs and their compile options
(``make_hlo_program``, ``make_plugin_program``, ``make_colocated_python_program``, ...), which a
client compiles with ``compile_ifrt_program``."""
from plax.runtime.xla import ifrt_programs  # noqa: F401
