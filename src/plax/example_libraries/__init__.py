"""plax.example_libraries, as ``jax.example_libraries``: two small teaching libraries.

``stax`` builds neural networks from (init_fun, apply_fun) pairs and ``optimizers``
holds (init_fun, update_fun, get_params) triples for first-order optimizers. Both are
written on plax's public API only; import the submodules by name
(``from plax.example_libraries import stax, optimizers``).
"""
