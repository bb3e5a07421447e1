"""``jax._src.test_util``: the test utilities JAX's own test files import (``jtu``), on
plax's machinery.

JAX's tests are written against these names: ``JaxTestCase`` (numerical assertions with
per-dtype tolerances, ``_CompileAndCheck``, ``_CheckAgainstNumpy``, a per-test
``RandomState``, strict promotion and checks on by default), ``sample_product`` and friends
(which cases run and what they are called), the ``rand_*`` generators, device filters,
meshes and counters of compiles. Names, signatures and behaviour are JAX 0.10.2's; the
choice and naming of cases matches JAX's exactly, so that test ids agree.

The pieces live in ``plax._src.test_util_parts``; this module gathers them and adds the
test case class.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
import sys
import tempfile
import textwrap
import unittest
import zlib
import numpy as np
import numpy.random as npr
from absl.testing import parameterized

import plax
from plax import tree_util
from plax.core import dtypes as _dtypes
from plax.core.config import config
from plax.core.trace import EvalTrace, current_trace
from plax.test_util import check_grads, check_jvp, check_vjp  # noqa: F401
from plax._src.test_util_parts.cases import (  # noqa: F401
    NUMPY_SCALAR_SHAPE, PYTHON_SCALAR_SHAPE, ScalarShape, _cast_to_shape, _dims_of_shape,
    _choice, cases_from_gens, dtype_str, format_shape_dtype_string, is_valid_shape,
    named_cases_from_sampler, parameterized_filterable, sample_product,
    sample_product_testcases, sanitize_test_name)
from plax._src.test_util_parts.devices import (  # noqa: F401
    _device_filter, _LazyDtypes, create_mesh, device_supports_buffer_donation,
    device_under_test, dtypes, get_tpu_version, is_cloud_tpu, is_cloud_tpu_at_least,
    is_cuda_compute_capability_at_least, is_cuda_compute_capability_equal, is_device_cuda,
    is_device_rocm, is_device_tpu, is_device_tpu_at_least, pjrt_c_api_version_at_least,
    request_cpu_devices, run_on_devices, skip_on_devices, skip_on_flag, supported_dtypes,
    test_device_matches, with_explicit_mesh, with_mesh, with_mesh_from_kwargs)
from plax._src.test_util_parts.events import (  # noqa: F401
    assert_num_jit_and_pmap_compilations, collect_lowered_jaxprs, count_aot_jit_cpp_cache_miss,
    count_compilation_after_persistent_cache_miss, count_device_put,
    count_device_put_fast_path_hit, count_events, count_jax_array_shard_arg_calls,
    count_jit_and_pmap_lowerings, count_jit_compilation_cache_miss,
    count_jit_tracing_cache_miss, count_pjit_cpp_cache_miss, count_primitive_compile_misses,
    count_primitive_compiles)
from plax._src.test_util_parts.flags import (  # noqa: F401
    MAX_CASES_SAMPLING_RETRIES as _MAX_CASES_SAMPLING_RETRIES, NUM_GENERATED_CASES,
    SKIP_SLOW_TESTS, TEST_DUT as _TEST_DUT, TEST_NUM_THREADS,
    TEST_WITH_PERSISTENT_COMPILATION_CACHE)
from plax._src.test_util_parts.loader import (  # noqa: F401
    JaxTestLoader, JaxTestSuite, thread_unsafe_test, thread_unsafe_test_class)
from plax._src.test_util_parts.random_values import (  # noqa: F401
    _rand_dtype, rand_bool, rand_default, rand_fullrange, rand_indices_unique_along_axis,
    rand_int, rand_like, rand_nonzero, rand_not_small, rand_positive, rand_small,
    rand_small_positive, rand_some_equal, rand_some_inf, rand_some_inf_and_nan,
    rand_some_nan, rand_some_zero, rand_uniform, rand_unique_int)
from plax._src.test_util_parts.tolerances import (  # noqa: F401
    _assert_numpy_allclose, _default_tolerance, _dtype, _normalize_tolerance, check_close,
    check_eq, default_gradient_tolerance, default_tolerance, is_python_scalar,
    join_tolerance, tolerance)
from plax._src.test_util_parts.tolerances import canonicalize as _canonicalize
from plax._src.test_util_parts.warning_capture import ignore_warning  # noqa: F401

ToleranceDict = dict  # dtype -> tolerance
_SMEM_SIZE_BOUND_FOR_TESTS = 99 * 1024  # (GPU shared memory some tests stay within)

# --- small helpers ---------------------------------------------------------------------


def num_float_bits(dtype) -> int:
    """The width in bits of floating ``dtype`` as plax holds it."""
    return _dtypes.finfo(_canonicalize(dtype)).bits


_DEFAULT_OF_KIND = {"b": np.bool_, "i": _dtypes.default_int_dtype,
                    "u": lambda: _canonicalize(np.uint64), "f": _dtypes.default_float_dtype,
                    "c": _dtypes.default_complex_dtype}


def to_default_dtype(arr) -> np.ndarray:
    """``arr`` as an array of plax's default dtype of its kind (32 or 64 bits, by x64)."""
    arr = np.asarray(arr)
    default = _DEFAULT_OF_KIND.get(arr.dtype.kind)
    return arr.astype(default()) if default else arr


def with_jax_dtype_defaults(func, use_defaults=True):
    """``func`` (typically NumPy's) with its outputs in plax's default dtypes: all of them,
    or those where the pytree ``use_defaults`` says True."""
    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        result = func(*args, **kwargs)
        if isinstance(use_defaults, bool):
            return tree_util.tree_map(to_default_dtype, result) if use_defaults else result
        return tree_util.tree_map(lambda a, use: to_default_dtype(a) if use else a,
                                  result, use_defaults)
    return wrapped


def is_sequence(x) -> bool:
    """Whether ``x`` can be iterated."""
    try:
        iter(x)
    except TypeError:
        return False
    return True


@contextlib.contextmanager
def _capture_output(fp):
    """Yields a function returning what was written to ``fp`` (Python and native code
    alike, through its file descriptor) once the block is over."""
    captured = [None]

    def get_output() -> str:
        if captured[0] is None:
            raise ValueError("get_output() called while the context is active.")
        return captured[0]
    with tempfile.NamedTemporaryFile(mode="w+", encoding="utf-8") as f:
        saved = os.dup(fp.fileno())
        os.dup2(f.fileno(), fp.fileno())
        try:
            yield get_output
        finally:
            fp.flush()
            os.fsync(fp.fileno())
            f.seek(0)
            captured[0] = f.read()
            os.dup2(saved, fp.fileno())
            os.close(saved)


def capture_stdout():
    """``_capture_output`` of ``sys.stdout``."""
    return _capture_output(sys.stdout)


def capture_stderr():
    """``_capture_output`` of ``sys.stderr``."""
    return _capture_output(sys.stderr)


def jaxlib_version() -> tuple:
    """The installed jaxlib's version."""
    from plax.runtime import xla
    return tuple(int(p) for p in xla.jaxlib_version().split(".")[:3])


def _false() -> bool:
    return False


# plax runs on a released jaxlib: no sanitizer builds.
is_optimized_build = is_asan = is_msan = is_tsan = is_sanitized = _false


def is_gil_disabled() -> bool:
    """Whether this is a free-threaded Python running without the GIL."""
    return not sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else False


def is_test_rbe() -> bool:
    """Whether ``IS_JAX_RBE_TESTING`` says the tests run on remote build execution."""
    return os.getenv("IS_JAX_RBE_TESTING", "").lower() in {"true", "1", "yes", "y"}


def pattern_search(patterns, string: str):
    """The first of ``patterns`` (one or several regular expressions) found in ``string``."""
    for pattern in (patterns,) if isinstance(patterns, str) else patterns:
        if re.search(pattern, string):
            return pattern
    return None


def device_kind_match(device_patterns):
    """The first pattern found in the first device's kind, or None."""
    return pattern_search(device_patterns, plax.devices()[0].device_kind)


def is_cuda_version_at_least(major: int, minor: int) -> bool:
    """Whether the CUDA runtime is at least that version (False without CUDA)."""
    assert 0 <= major and 0 <= minor < 100
    return False


def pytest_mark_if_available(marker: str):
    """A decorator applying ``pytest.mark.<marker>`` when pytest is installed."""
    def wrap(func_or_class):
        try:
            import pytest
        except ImportError:
            return func_or_class
        return getattr(pytest.mark, marker)(func_or_class)
    return wrap


def is_running_under_pytest() -> bool:
    """Whether pytest is loaded."""
    return "pytest" in sys.modules


def skip_under_pytest(reason: str):
    """Skip the test when run under pytest."""
    return unittest.skipIf(is_running_under_pytest(), "Running under pytest: " + reason)


def runtime_environment():
    """``"bazel"``, ``"pytest"``, or None when Python's executable is unknown."""
    if sys.executable is None:
        return None
    return "bazel" if "bazel-out" in sys.executable else "pytest"


def check_raises(thunk, err_type, msg):
    """``thunk()`` must raise ``err_type`` with a message starting with ``msg``."""
    try:
        thunk()
        assert False
    except err_type as e:
        assert str(e).startswith(msg), f"\n{e}\n\n{msg}\n"


def check_raises_regexp(thunk, err_type, pattern):
    """``thunk()`` must raise ``err_type`` with a message matching ``pattern``."""
    try:
        thunk()
        assert False
    except err_type as e:
        assert re.match(pattern, str(e)), f"{e}\n\n{pattern}\n"


def iter_eqns(jaxpr):
    """The equations of ``jaxpr`` and of the jaxprs its equations hold, depth first."""
    from plax.extend.core import subjaxprs
    yield from jaxpr.eqns
    for inner in subjaxprs(jaxpr):
        yield from iter_eqns(inner)


def _dot_params(fun, args, name):
    jaxpr = plax.make_jaxpr(fun)(*args)
    return [eqn.params[name] for eqn in iter_eqns(jaxpr.jaxpr)
            if eqn.primitive == plax.lax.dot_general_p]


def assert_dot_precision(expected_precision, fun, *args):
    """Every dot_general ``fun`` traces to has that precision (for both operands)."""
    for precision in _dot_params(fun, args, "precision"):
        msg = f"Unexpected precision: {expected_precision} != {precision}"
        if isinstance(precision, tuple):
            assert precision[0] == expected_precision, msg
            assert precision[1] == expected_precision, msg
        else:
            assert precision == expected_precision, msg


def assert_dot_preferred_element_type(expected, fun, *args, **kwargs):
    """Every dot_general ``fun`` traces to has that preferred element type."""
    for found in _dot_params(functools.partial(fun, **kwargs), args,
                             "preferred_element_type"):
        assert expected == found, f"Unexpected preferred_element_type: {expected} != {found}"


def fwd_bwd_jaxprs(f, *example_args):
    """The jaxprs of ``f``'s VJP: the forward pass (``vjp`` itself) and the backward one."""
    fwd_jaxpr, (y_shape, res_shape) = plax.make_jaxpr(
        lambda *args: plax.vjp(f, *args), return_shape=True)(*example_args)
    bwd_jaxpr = plax.make_jaxpr(lambda res, outs: res(outs))(res_shape, y_shape)
    return fwd_jaxpr, bwd_jaxpr


@contextlib.contextmanager
def register_event_duration_listener(callback):
    """Inside, ``callback`` hears plax.monitoring's event durations."""
    from plax import monitoring
    try:
        monitoring.register_event_duration_secs_listener(callback)
        yield
    finally:
        monitoring.unregister_event_duration_listener(callback)


@contextlib.contextmanager
def set_env(**kwargs):
    """Inside, the environment variables given are set (or unset, for None)."""
    saved = {key: os.environ.pop(key, None) for key in kwargs}
    os.environ.update({k: v for k, v in kwargs.items() if v is not None})
    try:
        yield
    finally:
        for key in kwargs:
            os.environ.pop(key, None)
        os.environ.update({k: v for k, v in saved.items() if v is not None})


_version_regex = re.compile(r"([0-9]+(?:\.[0-9]+)*)(?:(rc|dev).*)?")


def parse_version(v: str) -> tuple:
    """``"1.26.4"`` -> ``(1, 26, 4)`` (a trailing rc/dev part dropped)."""
    found = _version_regex.match(v)
    if found is None:
        raise ValueError(f"Unable to parse version '{v}'")
    return tuple(int(x) for x in found.group(1).split("."))


def numpy_version() -> tuple:
    """NumPy's version as a tuple."""
    return parse_version(np.__version__)


# --- configuration -------------------------------------------------------------------------

def strict_promotion_if_dtypes_match(dtypes):
    """A context manager: strict dtype promotion if all ``dtypes`` are equal, else
    standard."""
    if all(dtype == dtypes[0] for dtype in dtypes):
        return config.override("numpy_dtype_promotion", "strict")
    return config.override("numpy_dtype_promotion", "standard")


@contextlib.contextmanager
def global_config_context(**kwds):
    """Inside, the flags given have those values process-wide (restored after)."""
    saved = {}
    try:
        for key, value in kwds.items():
            saved[key] = config.read(key)
            config.update(key, value)
        yield
    finally:
        for key, value in saved.items():
            config.update(key, value)


@contextlib.contextmanager
def thread_local_config_context(**kwds):
    """Inside, the flags given have those values in this thread."""
    with contextlib.ExitStack() as stack:
        for name, value in kwds.items():
            stack.enter_context(config.override(name, value))
        yield


class NotPresent:
    """A flag missing on one side of a comparison of configurations."""

    def __repr__(self):
        return "<not present>"


def _global_flag_values() -> dict:
    flags = {id(f): f for f in config._by_any_name.values()}
    return {f.name: f.global_value for f in flags.values()}


@contextlib.contextmanager
def assert_global_configs_unchanged():
    """Fail if the block changed a flag's process-wide value."""
    before = _global_flag_values()
    yield
    after = _global_flag_values()
    changed = {k: (v, after.get(k, NotPresent())) for k, v in before.items()
               if k not in after or not _same(after[k], v)}
    if changed:
        raise AssertionError(f"Test changed global config values. Differing values are: "
                             f"{changed}")


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return a is b


def with_config(**kwds):
    """A JaxTestCase class decorator: its tests run with those flags set in their thread
    (over the base classes' own settings)."""
    def decorator(cls):
        assert inspect.isclass(cls) and issubclass(cls, JaxTestCase), \
            "@with_config can only wrap JaxTestCase class definitions."
        settings = {}
        for base in cls.__bases__:
            settings.update(getattr(base, "_default_thread_local_config", {}))
        cls._default_thread_local_config = {**settings, **kwds}
        return cls
    return decorator


def with_global_config(**kwds):
    """A JaxTestCase class decorator: its tests run with those flags set process-wide."""
    def decorator(cls):
        assert inspect.isclass(cls) and issubclass(cls, JaxTestCase), \
            "@with_config can only wrap JaxTestCase class definitions."
        settings = {}
        for base in cls.__bases__:
            settings.update(getattr(base, "_default_global_config", {}))
        cls._default_global_config = {**settings, **kwds}
        return cls
    return decorator


def promote_like_jnp(fun, inexact=False):
    """``fun`` (a NumPy reference) with its arguments first promoted as plax.numpy would
    (to their common result type; to an inexact one with ``inexact``)."""
    from plax.numpy import util as jnp_util
    promote = jnp_util.promote_dtypes_inexact if inexact else jnp_util.promote_dtypes

    def wrapper(*args, **kw):
        leaves, tree = tree_util.tree_flatten(args)
        return fun(*tree_util.tree_unflatten(tree, promote(*leaves)), **kw)
    return wrapper


# --- the test case --------------------------------------------------------------------------

def _trace_state_clean() -> bool:
    return type(current_trace()) is EvalTrace


class JaxTestCase(parameterized.TestCase):
    """Base class of JAX's tests: numerical assertions with per-dtype tolerances, a
    ``RandomState`` per test seeded from its name (``self.rng()``), and flags set for each
    test (checks on, strict dtype promotion, rank promotion raising, ...)."""

    _default_global_config: dict = {}
    _default_thread_local_config = {
        "jax_enable_checks": True,
        "jax_numpy_dtype_promotion": "strict",
        "jax_numpy_rank_promotion": "raise",
        "jax_traceback_filtering": "off",
        "jax_legacy_prng_key": "error",
    }

    def setUp(self):
        super().setUp()
        self.enterContext(assert_global_configs_unchanged())
        # adler32: the same seed in every run (``hash`` is salted), and within int32.
        self._rng = npr.RandomState(zlib.adler32(self._testMethodName.encode()))
        self.enterContext(global_config_context(**self._default_global_config))
        for name, value in self._default_thread_local_config.items():
            self.enterContext(config.override(name, value))
        if TEST_WITH_PERSISTENT_COMPILATION_CACHE.value:
            assert TEST_NUM_THREADS.value <= 1, \
                "Persistent compilation cache is not thread-safe."
            for name, value in (("enable_compilation_cache", True),
                                ("persistent_cache_min_compile_time_secs", 0),
                                ("persistent_cache_min_entry_size_bytes", 0)):
                self.enterContext(config.override(name, value))
            cache_dir = self.enterContext(tempfile.TemporaryDirectory())
            self.enterContext(config.override("compilation_cache_dir", cache_dir))

    def tearDown(self) -> None:
        assert _trace_state_clean(), "a test left a transformation's trace current"
        super().tearDown()

    def rng(self):
        """This test's ``np.random.RandomState``."""
        return self._rng

    def assertDeprecationWarnsOrRaises(self, deprecation_id: str, message: str, *,
                                       error_class=ValueError):
        """A context manager expecting the deprecation's warning (plax accelerates no
        deprecation into an error)."""
        del deprecation_id, error_class
        return self.assertWarnsRegex(DeprecationWarning, message)

    def assertArraysEqual(self, actual, desired, *, check_dtypes=True, err_msg="",
                          allow_object_dtype=False, verbose=True):
        """``actual`` and ``desired`` are equal arrays (of matching dtypes)."""
        if check_dtypes:
            self.assertDtypesMatch(actual, desired)
        actual, desired = np.asarray(actual), np.asarray(desired)
        if not allow_object_dtype and object in (actual.dtype, desired.dtype):
            raise TypeError(
                "assertArraysEqual may be poorly behaved when np.asarray casts to "
                "dtype=object. If comparing PRNG keys, consider "
                "random_test.KeyArrayTest.assertKeysEqual. If comparing collections of "
                "arrays, consider using assertAllClose. To let this test proceed anyway, "
                "pass allow_object_dtype=True.")
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(actual, desired, err_msg=err_msg, verbose=verbose)

    def assertArraysAllClose(self, actual, desired, *, check_dtypes=True, atol=None,
                             rtol=None, err_msg=""):
        """Equal shapes and values within the dtypes' tolerances."""
        self.assertEqual(actual.shape, desired.shape)
        atol = max(tolerance(_dtype(actual), atol), tolerance(_dtype(desired), atol))
        rtol = max(tolerance(_dtype(actual), rtol), tolerance(_dtype(desired), rtol))
        _assert_numpy_allclose(actual, desired, atol=atol, rtol=rtol, err_msg=err_msg)
        if check_dtypes:
            self.assertDtypesMatch(actual, desired)

    def assertDtypesMatch(self, actual, desired, *, canonicalize_dtypes=True):
        """The same dtype (as plax holds them, unless x64 is on or not canonicalizing)."""
        if not config.read("enable_x64") and canonicalize_dtypes:
            self.assertEqual(_canonicalize(_dtype(actual)), _canonicalize(_dtype(desired)))
        else:
            self.assertEqual(_dtype(actual), _dtype(desired))

    def assertAllClose(self, actual, desired, *, check_dtypes=True, atol=None, rtol=None,
                       canonicalize_dtypes=True, err_msg=""):
        """Close arrays, or dicts and sequences of them compared element by element."""
        kw = dict(check_dtypes=check_dtypes, atol=atol, rtol=rtol,
                  canonicalize_dtypes=canonicalize_dtypes, err_msg=err_msg)
        if isinstance(actual, dict):
            self.assertIsInstance(desired, dict)
            self.assertEqual(set(actual.keys()), set(desired.keys()))
            for k in actual.keys():
                self.assertAllClose(actual[k], desired[k], **kw)
        elif is_sequence(actual) and not hasattr(actual, "__array__"):
            if not (is_sequence(desired) and not hasattr(desired, "__array__")):
                self.fail(f"Expected sequence, got {desired}")
            self.assertEqual(len(actual), len(desired))
            for a, d in zip(actual, desired):
                self.assertAllClose(a, d, **kw)
        elif hasattr(actual, "__array__") or np.isscalar(actual):
            if not (hasattr(desired, "__array__") or np.isscalar(desired)):
                self.fail(f"Expected array-like, got {desired}")
            if check_dtypes:
                self.assertDtypesMatch(actual, desired,
                                       canonicalize_dtypes=canonicalize_dtypes)
            self.assertArraysAllClose(np.asarray(actual), np.asarray(desired),
                                      check_dtypes=False, atol=atol, rtol=rtol,
                                      err_msg=err_msg)
        elif actual == desired:
            return
        else:
            raise TypeError((type(actual), type(desired)))

    def assertMultiLineStrippedEqual(self, expected, what):
        """Equal strings once dedented and each line stripped."""
        spaces = re.compile(r"\s*\n\s*")
        expected_clean = spaces.sub("\n", textwrap.dedent(expected).strip())
        what_clean = spaces.sub("\n", textwrap.dedent(what).strip())
        if what_clean != expected_clean:
            print(f"Found\n{what}\n")
            self.assertMultiLineEqual(expected_clean, what_clean,
                                      msg=f"Found\n{what}\nExpecting\n{expected}")

    @contextlib.contextmanager
    def assertNoWarnings(self):
        """Inside, a warning fails the test (it is raised)."""
        from plax._src.test_util_parts.warning_capture import raise_on_warnings
        with raise_on_warnings():
            yield

    @contextlib.contextmanager
    def assertWarns(self, warning, *, msg=None):
        """A context manager (only): a warning of that class, containing ``msg``, inside."""
        from plax._src.test_util_parts.warning_capture import record_warnings
        with record_warnings() as caught:
            yield
        for w in caught:
            if isinstance(w.message, warning) and (msg is None or msg in str(w.message)):
                return
        self.fail(f"Expected warning not found {warning}:'{msg}', got {caught}")

    @contextlib.contextmanager
    def assertWarnsRegex(self, warning, regex):
        """A context manager (only): a warning of that class matching ``regex``, inside."""
        from plax._src.test_util_parts.warning_capture import record_warnings
        if regex is not None and not isinstance(regex, re.Pattern):
            regex = re.compile(regex)
        with record_warnings() as caught:
            yield
        for w in caught:
            if isinstance(w.message, warning) and (regex is None
                                                   or regex.search(str(w.message))):
                return
        self.fail(f"Expected warning not found {warning}:'{regex}', "
                  f"got warnings: {[str(w.message) for w in caught]}")

    def _CompileAndCheck(self, fun, args_maker, *, check_dtypes=True, tol=None, rtol=None,
                         atol=None, check_cache_misses=True):
        """``fun`` op by op and under ``jit`` agree, on two sets of arguments; a second op-by-op
        call compiles nothing, and a compiled call runs no Python."""
        args = args_maker()
        python_should_be_executing = True

        def wrapped_fun(*args):
            self.assertTrue(python_should_be_executing)
            return fun(*args)

        python_ans = fun(*args)
        python_shapes = tree_util.tree_map(lambda x: np.shape(x), python_ans)
        np_shapes = tree_util.tree_map(lambda x: np.shape(np.asarray(x)), python_ans)
        self.assertEqual(python_shapes, np_shapes)

        with count_primitive_compile_misses() as compiles:
            python_ans = fun(*args)
        if check_cache_misses and TEST_NUM_THREADS.value <= 1:
            self.assertEqual(0, compiles(), f"Compilation detected during second call of "
                                            f"{fun} in op-by-op mode.")

        cfun = plax.jit(wrapped_fun)
        python_should_be_executing = True
        monitored_ans = cfun(*args)
        python_should_be_executing = False
        compiled_ans = cfun(*args)
        close = dict(check_dtypes=check_dtypes, atol=atol or tol, rtol=rtol or tol)
        self.assertAllClose(monitored_ans, python_ans, **close)
        self.assertAllClose(compiled_ans, python_ans, **close)

        args = args_maker()
        python_should_be_executing = True
        python_ans = fun(*args)
        python_should_be_executing = False
        compiled_ans = cfun(*args)
        self.assertAllClose(compiled_ans, python_ans, **close)

    def _CheckAgainstNumpy(self, numpy_reference_op, lax_op, args_maker, check_dtypes=True,
                           tol=None, atol=None, rtol=None, canonicalize_dtypes=True):
        """``lax_op`` and its NumPy reference agree on one set of arguments."""
        args = args_maker()
        lax_ans = lax_op(*args)
        numpy_ans = numpy_reference_op(*args)
        self.assertAllClose(lax_ans, numpy_ans, check_dtypes=check_dtypes,
                            atol=atol or tol, rtol=rtol or tol,
                            canonicalize_dtypes=canonicalize_dtypes)

    def assertCacheMisses(self, func, *, cpp=None, aot_call=None, tracing=None,
                          lowering=None, compilation_after_persistent_cache_miss=None):
        """``func()`` misses jit's caches exactly as many times as given."""
        with (count_pjit_cpp_cache_miss() as cpp_count,
              count_aot_jit_cpp_cache_miss() as aot_call_count,
              count_jit_tracing_cache_miss() as tracing_count,
              count_jit_and_pmap_lowerings() as lowering_count,
              count_compilation_after_persistent_cache_miss() as compilation_count):
            func()
        for expected, count in ((cpp, cpp_count), (aot_call, aot_call_count),
                                (tracing, tracing_count), (lowering, lowering_count),
                                (compilation_after_persistent_cache_miss, compilation_count)):
            if expected is not None:
                self.assertEqual(expected, count())


def _noop_jit(x, *args, **kwargs):
    return x


_noop_jit._name = "noop"
JIT_IMPLEMENTATION = (plax.jit, _noop_jit)  # (what debug_nans' tests run under)


class BufferDonationTestCase(JaxTestCase):
    """JaxTestCase with assertions on donated (deleted) arrays."""

    def assertDeleted(self, x):
        self.assertTrue(x.is_deleted())

    def assertNotDeleted(self, x):
        self.assertFalse(x.is_deleted())

