"""Choosing and naming the cases of parameterized tests, exactly as JAX's test utilities do.

JAX's test files do not list their cases: ``sample_product`` draws ``NUM_GENERATED_CASES``
of them from a cartesian product, ``cases_from_gens`` and ``named_cases_from_sampler`` from
generators, and the test ids come from the drawn cases (absl numbers them, or the test
names them with ``format_shape_dtype_string``). A test id is only comparable with JAX's if
the same cases are drawn in the same order: the draws here use the same random streams
(``np.random.RandomState(42)``), consume them in the same order, and name things with the
same spelling.
"""
from __future__ import annotations

import functools
import math
import re

import numpy as np
from absl.testing import parameterized

from plax._src.test_util_parts.flags import MAX_CASES_SAMPLING_RETRIES, NUM_GENERATED_CASES

# --- the special "shapes" of scalars ----------------------------------------------------


class ScalarShape:
    """The shape of a scalar that is not a 0-d array: empty, of length 0."""

    def __len__(self):
        return 0

    def __getitem__(self, i):
        raise IndexError(f"index {i} out of range.")


class _NumpyScalar(ScalarShape):
    pass


class _PythonScalar(ScalarShape):
    pass


NUMPY_SCALAR_SHAPE = _NumpyScalar()  # a NumPy scalar (np.float32(1.0))
PYTHON_SCALAR_SHAPE = _PythonScalar()  # a Python scalar (1.0)


def is_valid_shape(shape, dtype) -> bool:
    """False for a Python-scalar shape of a dtype no Python scalar has (float32, int8, ...)."""
    if shape == PYTHON_SCALAR_SHAPE:
        return dtype == np.dtype(type(np.array(0, dtype=dtype).item()))
    return True


def _dims_of_shape(shape):
    """``shape`` as dimensions: a list or tuple as it is, a scalar shape as ``()``, an
    integer ``n`` as ``(n,)``."""
    if type(shape) in (list, tuple):
        return shape
    if isinstance(shape, ScalarShape):
        return ()
    if np.ndim(shape) == 0:
        return (shape,)
    raise TypeError(type(shape))


def _cast_to_shape(value, shape, dtype):
    """``value`` as the kind of object ``shape`` stands for (a NumPy or Python scalar for the
    scalar shapes; otherwise the array, whose shape is checked)."""
    if shape is NUMPY_SCALAR_SHAPE:
        return np.dtype(dtype).type(value)
    if shape is PYTHON_SCALAR_SHAPE:
        return np.asarray(value).item()
    if type(shape) in (list, tuple):
        assert np.shape(value) == tuple(shape)
        return value
    if np.ndim(shape) == 0:
        assert np.shape(value) == (shape,)
        return value
    raise TypeError(type(shape))


# --- names ------------------------------------------------------------------------------

def dtype_str(dtype) -> str:
    """NumPy's name of ``dtype`` (``float32``, ``bfloat16``, ...)."""
    return np.dtype(dtype).name


def format_shape_dtype_string(shape, dtype) -> str:
    """The spelling of a shape and dtype in test names: ``float32[2,3]``, ``int8[4,]`` (an
    integer shape), ``float32`` (a NumPy scalar), ``pyfloat64`` (a Python scalar)."""
    if isinstance(shape, np.ndarray):
        return f"{dtype_str(dtype)}[{shape}]"
    if isinstance(shape, list):
        shape = tuple(shape)
    if shape is NUMPY_SCALAR_SHAPE:
        return dtype_str(dtype)
    if shape is PYTHON_SCALAR_SHAPE:
        return "py" + dtype_str(dtype)
    if type(shape) is tuple:
        return f"{dtype_str(dtype)}[{','.join(str(d) for d in shape)}]"
    if type(shape) is int:
        return f"{dtype_str(dtype)}[{shape},]"
    raise TypeError(type(shape))


# Runs of characters that ``pytest -k`` or ``unittest -k`` cannot take become one "_".
_UNFILTERABLE = re.compile(r"[ \"'\[\](){}<>=,._]+")


def sanitize_test_name(s: str) -> str:
    """``s`` with each run of spaces, quotes, brackets, ``=``, ``,``, ``.`` and ``_`` made
    one underscore, so that the name works with ``-k`` filters."""
    return _UNFILTERABLE.sub("_", s)


# --- drawing cases ----------------------------------------------------------------------

@functools.cache
def _choice(n: int, m: int):
    """``m`` distinct indices out of ``range(n)``, drawn from ``RandomState(42)`` (the same
    ones for the same ``n`` and ``m``, every time and in every process)."""
    return np.random.RandomState(42).choice(n, size=m, replace=False)


def sample_product_testcases(*args, **kw) -> list:
    """The cases ``sample_product`` draws, as a list of keyword dicts.

    Each positional argument is a list of dicts (parameters chosen together), each keyword
    a list of values. A drawn index into the product picks from the positional lists first,
    then the keywords, in order, the first varying fastest."""
    groups = [list(a) for a in args]
    choices = [(name, list(values)) for name, values in kw.items()]
    total = math.prod(len(g) for g in groups) * math.prod(len(v) for _, v in choices)
    cases = []
    for index in _choice(total, min(total, NUM_GENERATED_CASES.value)):
        case = {}
        for group in groups:
            case.update(group[index % len(group)])
            index //= len(group)
        for name, values in choices:
            case[name] = values[index % len(values)]
            index //= len(values)
        cases.append(case)
    return cases


def sample_product(*args, **kw):
    """A decorator running the test on ``NUM_GENERATED_CASES`` cases sampled from the
    cartesian product of its arguments (absl's ``parameterized.product`` samples it all)."""
    return parameterized.parameters(*sample_product_testcases(*args, **kw))


def cases_from_gens(*gens):
    """Cases drawn from generators: for sizes 1, 3 and 10, ``NUM_GENERATED_CASES / 3 + 1``
    tuples ``(name, gen(size), ...)`` named ``_<size>_<i>``."""
    sizes = [1, 3, 10]
    per_size = int(NUM_GENERATED_CASES.value / len(sizes)) + 1
    for size in sizes:
        for i in range(per_size):
            yield (f"_{size}_{i}",) + tuple(gen(size) for gen in gens)


def named_cases_from_sampler(gen):
    """Up to ``NUM_GENERATED_CASES`` distinct cases from ``gen(choose_one)``, a generator of
    one named case whose choices are made by ``choose_one(options)`` (a one-item list drawn
    from ``RandomState(42)``). Drawing stops after ``MAX_CASES_SAMPLING_RETRIES`` draws in a
    row that gave nothing new."""
    seen = set()
    rng = np.random.RandomState(42)

    def choose_one(options):
        if not isinstance(options, (list, tuple)):
            options = list(options)
        return [options[rng.randint(len(options))]]

    retries = 0
    while len(seen) < NUM_GENERATED_CASES.value and \
            retries < MAX_CASES_SAMPLING_RETRIES.value:
        retries += 1
        drawn = list(gen(choose_one))
        if not drawn:
            continue
        if len(drawn) > 1:
            raise RuntimeError("Generator is expected to only return a single case when "
                               "sampling")
        case = drawn[0]
        if case["testcase_name"] in seen:
            continue
        retries = 0
        seen.add(case["testcase_name"])
        yield case


def parameterized_filterable(*, kwargs, testcase_name=None, one_containing=None):
    """absl's ``named_parameters`` over ``kwargs`` (one dict of keyword arguments per case)
    with names that ``-k`` filters accept (``sanitize_test_name``).

    A case is named ``testcase_name(kw)`` when that function is given, else by its own
    ``"testcase_name"`` entry, else ``key=value`` pairs joined by ``_`` in key order.
    ``one_containing`` keeps only the first case whose name contains it, under the test's
    own name."""
    if testcase_name is not None:
        named = [dict(testcase_name=sanitize_test_name(str(testcase_name(kw))), **kw)
                 for kw in kwargs]
    else:
        for kw in kwargs:  # (named in place, as JAX's)
            name = kw.get("testcase_name")
            if name is None:
                name = "_".join(f"{k}={kw[k]}" for k in sorted(kw))
            kw["testcase_name"] = sanitize_test_name(name)
        named = kwargs
    if one_containing is None:
        return parameterized.named_parameters(*named)
    kept = [kw for kw in named if one_containing in kw["testcase_name"]]
    assert kept, (f"No testcase_name contains '{one_containing}'. The testcase_name values "
                  "are\n  " + "\n  ".join(kw["testcase_name"] for kw in named))
    kept[0]["testcase_name"] = ""
    return parameterized.named_parameters([kept[0]])
