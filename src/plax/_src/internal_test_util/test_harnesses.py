"""``jax._src.internal_test_util.test_harnesses``: harnesses of lax's primitives.

The machinery (``Harness``, the argument descriptors, ``Limitation``, ``define`` and
``parameterized``) is in ``harness_core``. ``all_harnesses`` is the catalogue JAX's
shape-polymorphism tests draw their vmap cases from: the primitives' use cases under JAX's
group names, case names and dtypes (the test ids are made from them), defined by family
in the ``harnesses_*`` modules imported here.
"""
from __future__ import annotations

from plax._src.internal_test_util import harnesses_linalg  # noqa: F401  (defines harnesses)
from plax._src.internal_test_util.harness_core import (  # noqa: F401  (the module's names)
    ArgDescriptor, CustomArg, DType, Harness, Limitation, RandArg, Rng, StaticArg,
    all_harnesses, define, dtypes_to_str, parameterized)
from plax._src.internal_test_util import harnesses_windows  # noqa: F401  (defines harnesses)
from plax._src.internal_test_util import harnesses_indexing  # noqa: F401  (defines harnesses)
from plax._src.internal_test_util import harnesses_elementwise  # noqa: F401  (defines harnesses)
