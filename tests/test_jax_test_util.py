"""plax._src.test_util (what JAX's own test files import as ``jtu``): the cases it draws and
the names it gives them are JAX 0.10.2's (the expected values below were produced by real
JAX's test_util), its tolerances and random values are JAX's, its skip decorators skip, and
its counters count plax's real traces, lowerings and compiles."""
import unittest

import numpy as np
import pytest
from absl.testing import parameterized

import plax
import plax.numpy as jnp
from plax._src import test_util as jtu
from plax._src.internal_test_util import lax_test_util
from plax.core.config import config


@pytest.fixture
def ten_cases():
    """JAX's default number of cases (what the expected values below were drawn with)."""
    with config.override("jax_num_generated_cases", 10):
        yield


# --- which cases, and their names (facts from JAX 0.10.2) --------------------------------

def test_sample_product_draws_jaxs_cases_in_jaxs_order(ten_cases):
    cases = jtu.sample_product_testcases(
        [dict(m=m, n=n) for m in [1, 2, 3] for n in [4, 5]],
        dtype=[np.float32, np.int32, np.complex64], axis=[None, 0, 1, -1])
    got = [(c["m"], c["n"], np.dtype(c["dtype"]).name, c["axis"]) for c in cases]
    assert got == [(3, 4, "float32", None), (2, 4, "int32", -1), (1, 4, "float32", 0),
                   (1, 4, "float32", None), (3, 4, "int32", 0), (2, 4, "complex64", 1),
                   (3, 4, "int32", None), (3, 4, "complex64", 0), (1, 4, "complex64", None),
                   (1, 4, "float32", -1)]
    assert list(jtu._choice(72, 10)) == [4, 62, 18, 0, 28, 50, 10, 34, 12, 54]
    assert jtu.sample_product_testcases(x=[1, 2], y=["a"]) == [{"x": 2, "y": "a"},
                                                              {"x": 1, "y": "a"}]


def test_fewer_generated_cases_are_a_prefix_of_the_same_draw():
    with config.override("jax_num_generated_cases", 3):
        assert [c["x"] for c in jtu.sample_product_testcases(x=list(range(20)))] == \
            list(np.random.RandomState(42).choice(20, size=3, replace=False))


def test_cases_from_gens_and_named_cases_from_sampler(ten_cases):
    assert list(jtu.cases_from_gens(lambda s: s * 2)) == [
        (f"_{s}_{i}", 2 * s) for s in (1, 3, 10) for i in range(4)]

    def gen(choose):
        for a in choose([1, 2, 3, 4]):
            for b in choose("xyz"):
                yield dict(testcase_name=f"_{a}_{b}", a=a, b=b)
    names = [c["testcase_name"] for c in jtu.named_cases_from_sampler(gen)]
    assert names == ["_3_x", "_3_z", "_4_x", "_1_z", "_2_z", "_4_z", "_2_x", "_2_y", "_1_y",
                     "_3_y"]


def test_generated_test_names_match_jaxs(ten_cases):
    class T(parameterized.TestCase):
        @jtu.parameterized_filterable(kwargs=[dict(a=1, b="x y"), dict(a=2.5, b=[1, 2])])
        def test_f(self, a, b):
            pass

        @jtu.parameterized_filterable(kwargs=[dict(a=1), dict(a=22)],
                                      testcase_name=lambda kw: f"a={kw['a']}")
        def test_g(self, a):
            pass

        @jtu.sample_product(n=[3, 4, 5], k=["p", "q"])
        def test_h(self, n, k):
            pass
    assert sorted(n for n in dir(T) if n.startswith("test")) == [
        "test_f_a_1_b_x_y", "test_f_a_2_5_b_1_2_", "test_g_a_1", "test_g_a_22", "test_h0",
        "test_h1", "test_h2", "test_h3", "test_h4", "test_h5"]


def test_one_containing_keeps_one_case_under_the_tests_own_name():
    class T(parameterized.TestCase):
        @jtu.parameterized_filterable(kwargs=[dict(a=1), dict(a=2)], one_containing="a_2")
        def test_f(self, a):
            self.seen = a
    names = [n for n in dir(T) if n.startswith("test")]
    assert names == ["test_f"]
    with pytest.raises(AssertionError, match="No testcase_name contains 'zz'"):
        jtu.parameterized_filterable(kwargs=[dict(a=1)], one_containing="zz")


def test_format_shape_dtype_string_and_sanitized_names():
    f = jtu.format_shape_dtype_string
    assert f((2, 3), np.float32) == "float32[2,3]"
    assert f([4], "int8") == "int8[4]"
    assert f(5, np.bool_) == "bool[5,]"
    assert f((), np.complex64) == "complex64[]"
    assert f(jtu.NUMPY_SCALAR_SHAPE, np.float16) == "float16"
    assert f(jtu.PYTHON_SCALAR_SHAPE, np.float64) == "pyfloat64"
    assert f(np.array([1, 2]), np.uint32) == "uint32[[1 2]]"
    assert f((0, 1), "bfloat16") == "bfloat16[0,1]"
    with pytest.raises(TypeError, match="float"):
        f(2.0, np.float32)
    assert jtu.sanitize_test_name("a=[1, 2].x_(y)'z'") == "a_1_2_x_y_z_"


def test_lax_op_table_is_jaxs():
    ops = lax_test_util.lax_ops()
    assert len(ops) == 69 and ops[0].op == "neg" and ops[-1].op == "lt"
    assert [r.op for r in ops].count("sqrt") == 2
    assert lax_test_util.add_bdim(7, 1, (2, 3)) == (2, 7, 3)
    assert list(lax_test_util.all_bdims((2,))) == [(0,), (1,)]


# --- random values (the same draws as JAX's) ----------------------------------------------

def test_rand_generators_draw_what_jaxs_draw():
    rng = np.random.RandomState(0)
    x = jtu.rand_default(rng)((3,), np.float32)
    assert x.dtype == np.float32
    np.testing.assert_allclose(x, [5.292157, 1.2004716, 2.936214], rtol=1e-6)
    y = jtu.rand_some_inf_and_nan(rng)((6,), np.float32)
    assert np.isnan(y[0]) and np.isinf(y[4]) and y[4] < 0 and np.isinf(y[5])
    np.testing.assert_allclose(y[1:4], [4.4822373, -0.6154748, 0.9392031], rtol=1e-6)
    z = jtu.rand_some_nan(rng)((4,), np.complex64)
    np.testing.assert_allclose(z[0], 1.9608558 + 4.4080763j, rtol=1e-6)
    np.testing.assert_array_equal(jtu.rand_int(rng, 0, 10)((5,), np.int32), [2, 0, 3, 5, 9])
    w = jtu.rand_some_equal(rng)((4,), np.float32)
    assert w[0] == w[3] and w[1] != w[0]
    np.testing.assert_array_equal(jtu.rand_fullrange(rng)((2,), np.uint16), [50836, 31109])
    p = jtu.rand_positive(rng)(jtu.PYTHON_SCALAR_SHAPE, np.float64)
    assert type(p) is float and p == pytest.approx(1.4888511840032055)
    np.testing.assert_array_equal(jtu.rand_default(rng)((2,), np.uint8), [1, 2])


def test_rand_generators_shapes_dtypes_and_ranges():
    rng = np.random.RandomState(1)
    assert type(jtu.rand_default(rng)(jtu.NUMPY_SCALAR_SHAPE, np.float32)) is np.float32
    assert jtu.rand_small(rng)((2, 3), np.float32).shape == (2, 3)
    assert np.all(np.abs(jtu.rand_small(rng)((50,), np.float32)) < 0.01)
    pos = jtu.rand_positive(rng)((100,), np.float32)
    assert np.all((pos >= 1) & (pos < 3))
    u = jtu.rand_uniform(rng, -2.0, -1.0)((100,), np.float64)
    assert np.all((u >= -2) & (u < -1))
    assert np.all(jtu.rand_nonzero(rng)((100,), np.int8) != 0)
    assert np.all(np.abs(jtu.rand_not_small(rng)((100,), np.float32)) >= 10)
    assert jtu.rand_bool(rng)((4,), np.bool_).dtype == np.bool_
    assert sorted(jtu.rand_unique_int(rng)((6,), np.int32)) == list(range(6))
    zeros = jtu.rand_some_zero(rng)((200,), np.float32)
    assert 50 < np.sum(zeros == 0) < 150
    assert np.isfinite(jtu.rand_some_inf(rng)((50,), np.complex64)).all()  # (as JAX's)
    with pytest.raises(ValueError, match="explicit `high`"):
        jtu.rand_int(rng)((2,), np.float32)


# --- tolerances and assertions --------------------------------------------------------------

def test_tolerances_per_dtype():
    assert jtu.tolerance(np.float32) == 1e-6
    assert jtu.tolerance(np.float16) == 1e-3
    assert jtu.tolerance("bfloat16") == 1e-2
    assert jtu.tolerance(np.int32) == 0
    assert jtu.tolerance(np.float64) == (1e-15 if config.read("enable_x64") else 1e-6)
    assert jtu.tolerance(np.float32, {np.float32: 1e-3}) == 1e-3
    assert jtu.tolerance(np.float32, 0.5) == 0.5
    assert jtu.join_tolerance(1e-3, {np.float16: 1e-2})[np.dtype(np.float16)] == 1e-2
    assert jtu.default_gradient_tolerance[np.dtype(np.float32)] == 2e-3


class _Case(jtu.JaxTestCase):
    def runTest(self):
        pass


def _case():
    case = _Case()
    case.setUp()
    return case


def test_assert_all_close_uses_the_dtypes_tolerance():
    case = _case()
    try:
        a = np.array([1.0, 2.0], np.float32)
        case.assertAllClose(a, a + np.float32(1e-7))
        with pytest.raises(AssertionError, match="Not equal to tolerance"):
            case.assertAllClose(a, a + np.float32(1e-4))
        case.assertAllClose(a, a + np.float32(1e-4), atol=1e-3)
        case.assertAllClose({"x": (a, 3)}, {"x": (jnp.asarray(a), 3)})
        with pytest.raises(AssertionError, match="float32"):
            case.assertAllClose(a, a.astype(np.int32))
        case.assertAllClose(a, a.astype(np.float16), check_dtypes=False, atol=1e-3)
        case.assertArraysEqual(jnp.arange(3), np.arange(3, dtype=np.int32))
        with pytest.raises(TypeError, match="dtype=object"):
            case.assertArraysEqual(np.array([None]), np.array([None]))
    finally:
        case.doCleanups()


def test_jax_test_case_sets_flags_and_seeds_per_test():
    case = _case()
    try:
        assert config.read("jax_numpy_dtype_promotion") == "strict"
        assert config.read("jax_numpy_rank_promotion") == "raise"
        assert config.read("jax_enable_checks") is True
        assert case.rng().randint(1 << 30) == \
            np.random.RandomState(199361270).randint(1 << 30)  # adler32(b"runTest")
    finally:
        case.doCleanups()
    assert config.read("jax_numpy_rank_promotion") == "allow"


def test_with_config_and_strict_promotion_context():
    @jtu.with_config(jax_numpy_rank_promotion="allow")
    class T(jtu.JaxTestCase):
        pass
    assert T._default_thread_local_config["jax_numpy_rank_promotion"] == "allow"
    assert T._default_thread_local_config["jax_enable_checks"] is True
    with jtu.strict_promotion_if_dtypes_match([np.float32, np.int32]):
        assert config.read("numpy_dtype_promotion") == "standard"
    with jtu.strict_promotion_if_dtypes_match([np.float32, np.float32]):
        assert config.read("numpy_dtype_promotion") == "strict"


# --- devices and skipping -----------------------------------------------------------------

def test_skip_decorators_skip_by_device_tag():
    class T:
        @jtu.skip_on_devices("cpu")
        def not_on_cpu(self):
            return "ran"

        @jtu.run_on_devices("cpu")
        def only_on_cpu(self):
            return "ran"

        @jtu.run_on_devices("gpu", "tpu")
        def only_on_accelerators(self):
            return "ran"

        @jtu.skip_on_flag("jax_enable_x64", False)
        def needs_x64(self):
            return "ran"
    assert jtu.device_under_test() == "cpu" and jtu.test_device_matches(["cpu"])
    with pytest.raises(unittest.SkipTest, match="Skipped on devices with tags: cpu"):
        T().not_on_cpu()
    assert T().only_on_cpu() == "ran"
    with pytest.raises(unittest.SkipTest, match="unless running on devices with tags: gpu, tpu"):
        T().only_on_accelerators()
    with config.override("jax_enable_x64", False):
        with pytest.raises(unittest.SkipTest, match="FLAGS.jax_enable_x64 is False"):
            T().needs_x64()
    assert not jtu.is_device_tpu() and not jtu.is_device_tpu_at_least(4)
    assert jtu.is_cloud_tpu_at_least(2030, 1, 1)


def test_dtype_lists_follow_the_device_and_x64():
    assert np.float32 in jtu.supported_dtypes()
    assert (np.float64 in jtu.supported_dtypes()) == config.read("enable_x64")
    assert jtu.dtypes.floating[0] is np.float32
    assert jtu.dtypes.all_floating[1] is np.float16


def test_create_mesh_and_its_skip():
    mesh = jtu.create_mesh((2, 2), ("x", "y"))
    assert mesh.shape == {"x": 2, "y": 2}
    with pytest.raises(unittest.SkipTest, match="Test requires 4096 global devices"):
        jtu.create_mesh((64, 64), ("x", "y"))


# --- counters of real work -------------------------------------------------------------------

def test_counters_count_real_traces_lowerings_and_compiles():
    def f(x):
        return x * 3 - 1
    jf = plax.jit(f)
    x = jnp.arange(4.0)
    with jtu.count_jit_and_pmap_lowerings() as lowerings, \
            jtu.count_jit_tracing_cache_miss() as traces, \
            jtu.count_jit_compilation_cache_miss() as compiles:
        jf(x)
        jf(x)
    assert (lowerings(), traces(), compiles()) == (1, 1, 1)
    with jtu.count_pjit_cpp_cache_miss() as misses, jtu.count_jit_and_pmap_lowerings() as lo:
        jf(x)
    assert (misses(), lo()) == (0, 0)
    with jtu.assert_num_jit_and_pmap_compilations(1):
        plax.jit(lambda v: v + 2)(x)
    with jtu.collect_lowered_jaxprs() as lowered:
        plax.jit(lambda v: v - 2)(x)
    assert len(lowered) == 1 and "sub" in str(lowered[0][0])


def test_count_primitive_compiles():
    x = jnp.arange(3.0)
    with jtu.count_primitive_compiles() as count:
        plax.lax.cos(x)
        plax.lax.cos(x)
        assert count() == -1  # (known when the block ends, as in JAX)
    assert count() == 1


def test_compile_and_check_and_check_against_numpy():
    case = _case()
    try:
        rng = jtu.rand_default(case.rng())

        def args_maker():
            return [rng((3, 4), np.float32)]
        case._CompileAndCheck(lambda a: jnp.sin(a) * 2, args_maker)
        case._CheckAgainstNumpy(lambda a: np.sin(a) * 2, lambda a: jnp.sin(a) * 2, args_maker)
        with pytest.raises(AssertionError, match="Not equal to tolerance"):
            case._CheckAgainstNumpy(np.cos, jnp.sin, args_maker)
    finally:
        case.doCleanups()


def test_ignore_warning_and_assert_warns():
    import warnings
    with jtu.ignore_warning(category=UserWarning, message="boring"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            warnings.warn("boring stuff", UserWarning)
    case = _case()
    try:
        with case.assertWarnsRegex(UserWarning, "lo+k"):
            warnings.warn("look here", UserWarning)
        with pytest.raises(AssertionError, match="Expected warning not found"):
            with case.assertWarns(DeprecationWarning):
                pass
    finally:
        case.doCleanups()


# --- jax.experimental.sparse.test_util --------------------------------------------------------

def test_sparse_generators_draw_what_jaxs_draw():
    from plax.experimental.sparse import test_util as sptu
    rng = np.random.RandomState(0)
    m = sptu.rand_bcoo(rng)((3, 4), np.float32)
    assert (m.shape, m.nse) == ((3, 4), 6)
    assert np.asarray(m.indices).tolist() == [[0, 3], [2, 0], [0, 0], [2, 1], [2, 3], [2, 0]]
    np.testing.assert_allclose(np.asarray(m.data)[:3], [5.2922, 1.2005, 2.9362], atol=1e-4)
    b = sptu.rand_bcsr(rng)((3, 4), np.float32)
    assert np.asarray(b.indices).tolist() == [3, 3, 0, 2, 3, 0]
    assert np.asarray(b.indptr).tolist() == [0, 3, 3, 5]
    d = sptu.rand_sparse(rng)((2, 5), np.float32)
    assert (d != 0).astype(int).tolist() == [[1, 0, 0, 0, 1], [1, 1, 0, 0, 1]]
    assert [tuple(x) for x in sptu.iter_bcsr_layouts((2, 3, 4))] == [(0, 1, 2), (1, 0, 2)]
    assert len(list(sptu.iter_sparse_layouts((2, 3)))) == 6
    with pytest.raises(ValueError, match="bcsr array must have 2 sparse dimensions"):
        sptu.rand_bcsr(rng)((3,), np.float32)


# --- harnesses (test_harnesses' machinery) ------------------------------------------------

def test_harness_names_arguments_and_filters():
    from plax._src.internal_test_util import test_harnesses as th
    h = th.Harness("dynamic_slice", "shape=[2, 3]", lambda x, i, n: x[i:i + n],
                   [th.RandArg((5,), np.float32), 1, th.StaticArg(2)], dtype=np.float32,
                   jax_unimplemented=[th.Limitation("no f32 on tpu", devices="tpu",
                                                    dtypes=[np.float32])])
    assert h.fullname == "dynamic_slice_shape_2_3_" and str(h) == h.fullname
    rng = np.random.RandomState(0)
    x, i = h.dyn_args_maker(rng)
    assert x.shape == (5,) and x.dtype == np.float32 and i == 1
    np.testing.assert_array_equal(h.dyn_fun(x, i), x[1:3])
    assert h.filter("cpu") and not h.filter("tpu") and h.filter("tpu", include_jax_unimpl=True)
    assert not h.filter("cpu", one_containing="gather")
    assert th.dtypes_to_str([np.int8, np.int16, np.int32, np.int64, np.float32]) == \
        "float32, signed"
    assert th.dtypes_to_str([], empty_means_all=True) == "all"

    class Cases(parameterized.TestCase):
        @th.parameterized([h, th.Harness("neg", "", np.negative, [th.RandArg((2,), np.int32)],
                                         dtype=np.int32)])
        def test_harness(self, harness):
            self.assertIsInstance(harness, th.Harness)

    names = sorted(n for n in dir(Cases) if n.startswith("test_harness"))
    assert names == ["test_harness_dynamic_slice_shape_2_3_", "test_harness_neg_"]
    with pytest.raises(ValueError, match="no harness's name contains 'nope'"):
        th.parameterized([h], one_containing="nope")


def test_harnesses_windows_family_matches_jax_catalogue():
    from collections import Counter

    from plax._src.internal_test_util import test_harnesses as th
    counts = Counter(h.group_name for h in th.all_harnesses)
    on_cpu = Counter(h.group_name for h in th.all_harnesses if h.filter("cpu"))
    for group, n in (("select_and_scatter_add", 21), ("reduce", 25), ("reduce_window_max", 54),
                     ("reduce_window_mul", 30), ("dot_general", 246), ("clamp", 16),
                     ("conv_general_dilated", 110), ("rng_bit_generator", 9)):
        assert counts[group] == n, group
    assert on_cpu["clamp"] == 14
    names = {h.fullname: h for h in th.all_harnesses}
    assert ("rng_bit_generator_key_dtype_class_numpy_uint32_shape_uint32_5_7_algorithm_"
            "RandomAlgorithm_RNG_PHILOX:_2_") in names
    h = names["reduce_gen_max_min_shape_int32_4_6_initvalue_3_nr_operands_2_dimensions_1_"]
    x, y = h.dyn_args_maker(np.random.RandomState(0))
    hi, lo = h.dyn_fun(x, y)
    np.testing.assert_array_equal(hi, np.maximum(x.max(axis=1), 3))
    np.testing.assert_array_equal(lo, np.minimum(y.min(axis=1), 0))


def test_harnesses_indexing_family():
    from collections import Counter
    from plax._src.internal_test_util import test_harnesses as th
    counts = Counter(h.group_name for h in th.all_harnesses)
    expected = dict(  # real JAX 0.10.2's catalogue
        gather=162, scatter=485, scatter_add=665, scatter_mul=665, scatter_max=665,
        scatter_min=669, pad=132, dynamic_slice=60, dynamic_update_slice=38, select_n=24,
        slice=20, squeeze=19, transpose=13, complex=3, conj=3, real=1, imag=1)
    assert {g: counts[g] for g in expected} == expected
    by_name = {h.fullname: h for h in th.all_harnesses}
    assert "gather_from_slicing_name_:_:2_:_enable_xla_False" in by_name
    assert "conj_kwargs_operand_float32_3_4_kwargs_input_dtype_:_class_numpy_float32_" \
        in by_name
    off_cpu = [h.fullname for h in th.all_harnesses
               if h.group_name.startswith("scatter") and not h.filter("cpu")]
    assert sorted(off_cpu) == sorted(
        f"scatter_{op}_dtypes_shape_bool_5_scatterindices_0_2_updateshape_2_dimension_numbers_"
        "ScatterDimensionNumbers_update_window_dims_inserted_window_dims_0_scatter_dims_to_"
        "operand_dims_0_operand_batching_dims_scatter_indices_batching_dims_indicesaresorted_"
        "False_uniqueindices_False_mode_GatherScatterMode_FILL_OR_DROP_enablexla_True"
        for op in ("add", "mul"))
    h = by_name["dynamic_slice_shapes_a_float32_5_start_indices_-6_limit_indices_-5_"
                "enablexla_True"]
    x, i = h.dyn_args_maker(np.random.RandomState(0))
    np.testing.assert_array_equal(h.dyn_fun(x, i), x[:1])  # the start is clamped


def test_elementwise_harness_family_matches_jaxs_catalogue():
    import collections
    from plax._src.internal_test_util import test_harnesses as th
    counts = collections.Counter(h.group_name for h in th.all_harnesses)
    expected = {"convert_element_type": 109, "integer_pow": 66, "argmin": 54, "sign": 20,
                "bitcast_convert_type": 31, "min": 21, "rem": 15, "and": 9, "cbrt": 3}
    assert {g: counts[g] for g in expected} == expected  # JAX 0.10.2's (without x64)
    names = {h.fullname: h for h in th.all_harnesses}
    assert "round_rounding_methods_shape_float32_2_5_roundingmethod_1" in names
    assert "device_put_devices_shape_float32_3_4_device_cpu_" in names
    special = names["argmax_special_equal_shape_int32_3_axes_0_indexdtype_int32_enable_xla_False"]
    assert special.dtype == np.dtype(np.int32) and isinstance(special.dtype, np.dtype)
    assert all(h.filter("cpu") for h in th.all_harnesses if h.group_name == "nextafter")


def test_linalg_family_of_the_harness_catalogue():
    """Facts of JAX's catalogue: harnesses per group (all, and those that run on the CPU)."""
    import collections
    from plax._src.internal_test_util import test_harnesses as th
    counts = {"cummin": (26, 26), "cumlogsumexp": (10, 10), "top_k": (12, 12),
              "sort": (25, 25), "cholesky": (20, 15), "qr": (40, 20), "fft": (22, 22),
              "svd": (80, 40), "eig": (48, 24), "eigh": (24, 12), "lu": (12, 6),
              "triangular_solve": (22, 22), "custom_linear_solve": (3, 3),
              "tridiagonal_solve": (2, 2), "random_gamma": (4, 4), "random_split": (1, 1),
              "random_categorical": (9, 9), "random_randint": (9, 9)}
    every = collections.Counter(h.group_name for h in th.all_harnesses)
    on_cpu = collections.Counter(h.group_name for h in th.all_harnesses if h.filter("cpu"))
    assert {g: (every[g], on_cpu[g]) for g in counts} == counts
    by_name = {h.fullname: h for h in th.all_harnesses}
    h = by_name["sort_multiple_arrays_num_arrays_2_shape_int32_100_axis_0_isstable_False"
                "_num_keys_1"]
    assert h.dtype == np.dtype(np.int32) and isinstance(h.dtype, np.dtype)
    assert by_name["fft_dtypes_shape_complex64_14_15_16_17_ffttype_0_fftlengths_17_"].dtype \
        is np.complex64
    assert not by_name["qr_multi_array_shape_bfloat16_1_1_fullmatrices_False"].filter("cpu")
