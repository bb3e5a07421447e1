"""A pytest plugin that keeps one case in N of each file (``PLAX_JAXTESTS_SAMPLE``).

``PLAX_JAXTESTS_SAMPLE="tpu_pallas_test=8,tpu_ops_test=4"`` keeps, of those files, the cases
whose id hashes to 0 modulo N (CRC-32 of the id as JAX's run names it, so that a run on real
JAX and one on plax keep the same cases); other files run whole. A chip's time is short and
JAX's biggest TPU files hold thousands of cases: a fixed sample of them is scored instead.
"""
from __future__ import annotations

import os
import zlib


def sample_sizes(spec: str) -> dict[str, int]:
    """``"a_test=8,b=4"`` -> ``{"a_test": 8, "b_test": 4}``."""
    sizes = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, n = part.partition("=")
        name = name if name.endswith("_test") else name + "_test"
        sizes[name] = int(n)
    return sizes


def kept(case_id: str, n: int) -> bool:
    """Whether a case (``Class::test_name``, JAX's spelling) is in a sample of one in ``n``."""
    return zlib.crc32(case_id.replace("plax.", "jax.").encode()) % n == 0


def pytest_collection_modifyitems(config, items):
    sizes = sample_sizes(os.environ.get("PLAX_JAXTESTS_SAMPLE", ""))
    if not sizes:
        return
    keep, drop = [], []
    for item in items:
        module = os.path.splitext(os.path.basename(str(item.fspath)))[0]
        n = sizes.get(module)
        case_id = f"{item.cls.__name__ if item.cls else ''}::{item.name}"
        (keep if n is None or kept(case_id, n) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
