"""The pieces ``plax._src.test_util`` (``jax._src.test_util``) is assembled from.

flags (the test-only config flags), cases (sampling and naming parameterized cases),
random_values (the ``rand_*`` generators), tolerances (per-dtype tolerances and closeness
checks), devices (the device under test, device filters, meshes, dtype lists), events
(counting compiles, traces and cache misses), warning_capture (thread-safe warning
capture) and loader (JaxTestLoader and the thread-safety markers).
"""
