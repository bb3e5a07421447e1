"""Typed PRNG keys (``random.key``, dtype ``key<fry>``): their data, derivation and samplers
bit for bit as JAX 0.10.2 (values hard-coded here as the reference), typed equal to legacy
keys, keys through every transformation and shape op, and the errors JAX raises for them."""
import pickle
import subprocess
import sys

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax, random
from plax.first_order import prng

# JAX 0.10.2, jax_threefry_partitionable=True (the default).
SPLIT_0_4 = [[1797259609, 2579123966], [928981903, 3453687069], [4146024105, 2718843009],
             [2467461003, 3840466878]]
SPLIT_42_3 = [[1832780943, 270669613], [64467757, 2916123636], [2465931498, 255383827]]
SPLIT_42_2x2 = [[[1832780943, 270669613], [64467757, 2916123636]],
                [[2465931498, 255383827], [3134548294, 894150801]]]
FOLD_42_7 = [2547012911, 1371500959]
NORMAL_42 = [-0.02830461598932743, 0.4671318531036377, 0.2957029640674591]
UNIFORM_42 = [0.48870956897735596, 0.6797971725463867, 0.6162714958190918]
BITS_42 = [2098992034, 2919706841, 2646866425, 2409546199]
BITS8_42 = [162, 217, 249, 215, 21]
BITS16_42 = [5026, 12505, 63993, 49623, 29461]
RANDINT_42 = [4, 4, 1, 9, 9]                    # randint(key(42), (5,), 0, 10)
BERN_42 = [True, False, False, False, True, False, True, False]  # bernoulli(., 0.5, (8,))
GAMMA_42 = [3.6725165843963623, 1.0923854112625122, 3.5018391609191895]  # gamma(., 2.0, (3,))
PERM_42 = [4, 2, 5, 3, 0, 1]                    # permutation(key(42), 6)
CHOICE_42 = [7, 4, 2]                           # choice(key(42), 10, (3,), replace=False)
CAT_42 = [2, 1, 1, 0, 0]                        # categorical(., [.1, .5, 1, -1], shape=(5,))
EXP_42 = [0.670817494392395, 1.1388006210327148, 0.9578199982643127]
NORMAL_FOLD_42_7 = [0.28863969445228577, -0.00963292084634304]
# vmap over split(key(0), 3)
VMAP_NORMAL = [[1.004014253616333, -0.9063372015953064],
               [-2.442455768585205, -2.0356805324554443],
               [1.2956359386444092, 1.3550105094909668]]
VMAP_SPLIT = [[[4165894930, 804218099], [1353695780, 2116000888]],
              [[346279018, 360566543], [3968330031, 3923691647]],
              [[2799984767, 1105366846], [3777617834, 145086855]]]
VMAP_FOLD = [[4165894930, 804218099], [3968330031, 3923691647], [915694800, 1641710144]]
# scan(split-and-draw) carrying key(42) for 4 steps
SCAN_KEY = [2852371275, 1535037118]
SCAN_YS = [0.7276642322540283, 0.41648638248443604, 0.3464590311050415, 0.7496498823165894]
FORI_FOLD = [4179084902, 2188378661]            # fori_loop(0, 3, fold_in(k, i), key(42))
# The lax.prng primitives on batched keys split(key(0), 3) / split(key(0), 2).
PRIM_BITS = [[3617712097, 783310428], [31327077, 89727312], [3875991361, 3918267949]]
PRIM_BITS16 = [[59361, 24156], [869, 8528], [61249, 1581]]
PRIM_SPLIT = [[[4165894930, 804218099], [1353695780, 2116000888]],
              [[346279018, 360566543], [3968330031, 3923691647]]]
PRIM_FOLD = [[1526812653, 3822367991], [3748896811, 615658512]]  # msgs [5, 9]
# jax_threefry_partitionable=False.
OLD_SPLIT_42_3 = [[3134548294, 3733159049], [3746501087, 894150801], [801545058, 2363201431]]
OLD_NORMAL_42 = [0.18693546950817108, -1.2806504964828491, -1.559313178062439]
OLD_BITS8_42 = [45, 179, 215, 3, 244]
OLD_FOLD_42_7 = [2547012911, 1371500959]
OLD_UNIFORM_0 = [0.96532142162323, 0.2251589298248291, 0.6330299377441406, 0.2963818311691284]
OLD_PRIM_BITS = [[2384771982, 2983891053, 1278412471], [3746991216, 476962823, 1190051861]]

KEY_DTYPE = "key<fry>"


def as_list(x):
    return np.asarray(x).tolist()


def data(keys):
    return as_list(random.key_data(keys))


def is_key(x, shape):
    return str(x.dtype) == KEY_DTYPE and tuple(x.shape) == shape


@pytest.fixture
def original_layout():
    before = plax.config.jax_threefry_partitionable
    plax.config.update("jax_threefry_partitionable", False)
    try:
        yield
    finally:
        plax.config.update("jax_threefry_partitionable", before)


@pytest.fixture(scope="module")
def keys3():
    return random.split(random.key(0), 3)


# --- making keys and their data -------------------------------------------------------------
@pytest.mark.parametrize("seed,want", [(0, [0, 0]), (42, [0, 42]), (-1, [0, 4294967295]),
                                       (2 ** 32 + 7, [0, 7])])
def test_key_from_seed_and_its_data(seed, want):
    k = random.key(seed)
    assert is_key(k, ()) and k.ndim == 0
    kd = random.key_data(k)
    assert kd.dtype == np.uint32 and as_list(kd) == want
    assert as_list(random.PRNGKey(seed)) == want


def test_key_dtype_classes_and_impl():
    k = random.key(0)
    assert str(k.dtype) == KEY_DTYPE
    assert jnp.issubdtype(k.dtype, plax.dtypes.prng_key)
    assert jnp.issubdtype(k.dtype, plax.dtypes.extended)
    assert not jnp.issubdtype(jnp.uint32, plax.dtypes.prng_key)
    assert not jnp.issubdtype(random.PRNGKey(0).dtype, plax.dtypes.extended)
    assert random.key_impl(k) == "threefry2x32"
    assert str(random.key_impl(k)) == "threefry2x32"
    assert random.key_impl(random.PRNGKey(0)) == random.key_impl(k)
    assert random.key_impl(random.split(k, 3)) == "threefry2x32"


def test_repr_of_keys():
    assert repr(random.key(0)) == "Array((), dtype=key<fry>) overlaying:\n[0 0]"
    assert repr(random.split(random.key(0), 2)) == (
        "Array((2,), dtype=key<fry>) overlaying:\n[[1797259609 2579123966]\n"
        " [ 928981903 3453687069]]")


def test_wrap_key_data_round_trips():
    raw = np.array(SPLIT_0_4, np.uint32)
    ks = random.wrap_key_data(raw)
    assert is_key(ks, (4,))
    assert data(ks) == SPLIT_0_4
    assert data(random.wrap_key_data(jnp.asarray(raw).reshape(2, 2, 2))) == [SPLIT_0_4[:2],
                                                                             SPLIT_0_4[2:]]
    assert data(random.wrap_key_data(random.PRNGKey(42))) == [0, 42]
    assert data(random.wrap_key_data(random.key_data(random.key(5)))) == [0, 5]
    # key_data of a legacy key is the key itself
    assert as_list(random.key_data(random.PRNGKey(3))) == [0, 3]


def test_key_arrays_pickle_round_trip():
    ks = random.split(random.key(0), 4)
    back = pickle.loads(pickle.dumps(ks))
    assert is_key(back, (4,)) and data(back) == SPLIT_0_4
    assert as_list(random.uniform(back[2], (3,))) == as_list(random.uniform(ks[2], (3,)))


def test_a_key_array_unpickles_in_a_fresh_process():
    # The pickle names plax.random's rebuilder, so unpickling imports plax.random itself.
    code = ("import pickle, sys; k = pickle.loads(sys.stdin.buffer.read()); "
            "import plax.random; print(plax.random.key_data(k).tolist(), k.dtype)")
    proc = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(random.key(42)),
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert proc.stdout.decode().split("\n")[-2:] == ["[0, 42] key<fry>", ""]


def test_wrap_key_data_errors():
    with pytest.raises(TypeError, match="invalid PRNG key data"):
        random.wrap_key_data(jnp.zeros(3, jnp.uint32))
    with pytest.raises(TypeError, match="wrap_key_data accepts only uint32 key data"):
        random.wrap_key_data(random.key(0))


# --- split, fold_in, clone ------------------------------------------------------------------
def test_split_matches_jax_and_keeps_the_kind():
    ks = random.split(random.key(0), 4)
    assert is_key(ks, (4,)) and data(ks) == SPLIT_0_4
    assert data(random.split(random.key(42), 3)) == SPLIT_42_3
    k22 = random.split(random.key(42), (2, 2))
    assert is_key(k22, (2, 2)) and data(k22) == SPLIT_42_2x2
    legacy = random.split(random.PRNGKey(42), 3)
    assert legacy.dtype == np.uint32 and as_list(legacy) == SPLIT_42_3
    assert is_key(random.split(random.key(1)), (2,))


def test_fold_in_matches_jax_and_keeps_the_kind():
    f = random.fold_in(random.key(42), 7)
    assert is_key(f, ()) and data(f) == FOLD_42_7
    legacy = random.fold_in(random.PRNGKey(42), 7)
    assert legacy.dtype == np.uint32 and as_list(legacy) == FOLD_42_7
    assert data(random.fold_in(random.key(42), jnp.uint32(7))) == FOLD_42_7
    assert as_list(random.normal(f, (2,))) == NORMAL_FOLD_42_7


def test_clone_keeps_the_kind_and_the_values():
    k = random.key(42)
    c = random.clone(k)
    assert is_key(c, ()) and data(c) == [0, 42]
    assert as_list(random.normal(c, (3,))) == NORMAL_42
    lc = random.clone(random.PRNGKey(42))
    assert lc.dtype == np.uint32 and as_list(lc) == [0, 42]


@pytest.mark.parametrize("use", [
    lambda k: random.split(k), lambda k: random.fold_in(k, 1), lambda k: random.key_data(k),
    lambda k: random.normal(k, (2,)), lambda k: random.key_impl(k),
    lambda k: plax.jit(random.uniform)(k),
    lambda k: random.uniform(np.asarray(k) if k.dtype == np.uint32 else k)])  # a NumPy key
def test_legacy_prng_key_flag(use):
    from plax.core.config import config
    legacy = random.PRNGKey(42)  # making one is allowed in every mode, as in JAX
    try:
        config.update("jax_legacy_prng_key", "error")
        with pytest.raises(ValueError, match="Legacy uint32 key array passed as key to "
                                             "jax.random function"):
            use(legacy)
        use(random.key(42))  # typed keys are fine
        assert as_list(random.clone(legacy)) == [0, 42]  # clone takes any key, as JAX's
        config.update("jax_legacy_prng_key", "warn")
        with pytest.warns(UserWarning, match="jax_legacy_prng_key='allow'"):
            use(legacy)
    finally:
        config.update("jax_legacy_prng_key", "allow")


def test_single_key_functions_reject_key_arrays():
    ks = random.split(random.key(0), 2)
    with pytest.raises(ValueError, match=r"split accepts a single key, but was given a key "
                                         r"array of shape \(2,\) != \(\)"):
        random.split(ks)
    with pytest.raises(ValueError, match=r"fold_in accepts a single key"):
        random.fold_in(ks, 1)
    with pytest.raises(ValueError, match=r"accepts a single key"):
        random.normal(ks, (2,))


def test_original_layout_values(original_layout):
    assert data(random.split(random.key(42), 3)) == OLD_SPLIT_42_3
    assert as_list(random.normal(random.key(42), (3,))) == OLD_NORMAL_42
    assert as_list(random.bits(random.key(42), (5,), jnp.uint8)) == OLD_BITS8_42
    assert data(random.fold_in(random.key(42), 7)) == OLD_FOLD_42_7
    assert as_list(random.uniform(random.key(0), (4,))) == OLD_UNIFORM_0
    assert as_list(random.uniform(random.PRNGKey(0), (4,))) == OLD_UNIFORM_0
    bits = prng.random_bits(random.split(random.key(0), 2), 32, (3,))
    assert as_list(bits) == OLD_PRIM_BITS


def test_layout_flag_is_restored_after_the_fixture():
    assert data(random.split(random.key(42), 3)) == SPLIT_42_3


# --- samplers: typed keys equal legacy keys and JAX -----------------------------------------
SAMPLERS = {
    "normal": (lambda k: random.normal(k, (3,)), NORMAL_42),
    "uniform": (lambda k: random.uniform(k, (3,)), UNIFORM_42),
    "bits": (lambda k: random.bits(k, (4,)), BITS_42),
    "bits8": (lambda k: random.bits(k, (5,), jnp.uint8), BITS8_42),
    "bits16": (lambda k: random.bits(k, (5,), jnp.uint16), BITS16_42),
    "randint": (lambda k: random.randint(k, (5,), 0, 10), RANDINT_42),
    "bernoulli": (lambda k: random.bernoulli(k, 0.5, (8,)), BERN_42),
    "gamma": (lambda k: random.gamma(k, 2.0, (3,)), GAMMA_42),
    "permutation": (lambda k: random.permutation(k, 6), PERM_42),
    "choice": (lambda k: random.choice(k, 10, (3,), replace=False), CHOICE_42),
    "categorical": (lambda k: random.categorical(k, jnp.array([0.1, 0.5, 1.0, -1.0]),
                                                 shape=(5,)), CAT_42),
    "exponential": (lambda k: random.exponential(k, (3,)), EXP_42),
}


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_sampler_typed_equals_legacy_equals_jax(name):
    fn, want = SAMPLERS[name]
    typed = fn(random.key(42))
    legacy = fn(random.PRNGKey(42))
    assert as_list(typed) == want
    assert typed.dtype == legacy.dtype and as_list(legacy) == want


def test_bits_dtypes_from_typed_keys():
    k = random.key(42)
    assert random.bits(k, (5,), jnp.uint8).dtype == np.uint8
    assert random.bits(k, (5,), jnp.uint16).dtype == np.uint16
    assert random.bits(k, (2,)).dtype == np.uint32
    with pytest.raises(ValueError, match="dtype argument to `bits` must be an unsigned int"):
        random.bits(k, (2,), jnp.int32)


# --- the lax.prng primitives ----------------------------------------------------------------
def test_prim_seed_unwrap_wrap():
    k = prng.random_seed(jnp.int32(42), random.threefry.threefry_prng_impl)
    assert is_key(k, ()) and as_list(prng.random_unwrap(k)) == [0, 42]
    w = prng.random_wrap(jnp.array(SPLIT_42_3, jnp.uint32), random.threefry.threefry_prng_impl)
    assert is_key(w, (3,)) and as_list(prng.random_unwrap(w)) == SPLIT_42_3
    c = prng.random_clone(w)
    assert is_key(c, (3,)) and data(c) == SPLIT_42_3


def test_prim_random_bits_on_batched_keys(keys3):
    b = prng.random_bits(keys3, 32, (2,))
    assert b.shape == (3, 2) and b.dtype == np.uint32 and as_list(b) == PRIM_BITS
    per_key = np.stack([np.asarray(prng.random_bits(keys3[i], 32, (2,))) for i in range(3)])
    np.testing.assert_array_equal(np.asarray(b), per_key)
    b16 = prng.random_bits(keys3, 16, (2,))
    assert b16.dtype == np.uint16 and as_list(b16) == PRIM_BITS16
    assert as_list(prng.random_bits(random.key(42), 32, (4,))) == BITS_42


def test_prim_random_split_and_fold_in_on_batched_keys():
    ks = random.split(random.key(0), 2)
    s = prng.random_split(ks, (2,))
    assert is_key(s, (2, 2)) and data(s) == PRIM_SPLIT
    assert data(s[1]) == data(random.split(ks[1]))
    f = prng.random_fold_in(ks, jnp.array([5, 9], jnp.uint32))
    assert is_key(f, (2,)) and data(f) == PRIM_FOLD
    assert data(f[0]) == data(random.fold_in(ks[0], 5))
    assert data(prng.random_split(random.key(42), (3,))) == SPLIT_42_3


# --- transformations ------------------------------------------------------------------------
def test_jit_with_typed_keys_in_and_out():
    f = plax.jit(lambda k: (random.split(k, 3), random.normal(k, (3,))))
    ks, n = f(random.key(42))
    assert is_key(ks, (3,)) and data(ks) == SPLIT_42_3 and as_list(n) == NORMAL_42
    # the same jitted function with a legacy key gives the same numbers
    assert as_list(f(random.PRNGKey(42))[1]) == NORMAL_42
    g = plax.jit(lambda k: random.fold_in(k, 7))
    assert data(g(random.key(42))) == FOLD_42_7


def test_jit_key_as_static_closure_and_pytree():
    k = random.key(42)
    f = plax.jit(lambda d: {"k": d["k"], "n": random.normal(d["k"], (3,)) + d["x"]})
    out = f({"k": k, "x": jnp.float32(0.0)})
    assert is_key(out["k"], ()) and as_list(out["n"]) == NORMAL_42
    assert as_list(plax.jit(lambda: random.normal(k, (3,)))()) == NORMAL_42


def test_keys_are_pytree_leaves(keys3):
    leaves, tree = plax.tree_util.tree_flatten({"a": keys3, "b": [random.key(1), 2.0]})
    assert len(leaves) == 3 and is_key(leaves[0], (3,)) and is_key(leaves[1], ())
    back = plax.tree_util.tree_unflatten(tree, leaves)
    assert data(back["a"]) == data(keys3)
    mapped = plax.tree_util.tree_map(lambda x: x, keys3)
    assert is_key(mapped, (3,))


def test_vmap_over_split_keys_matches_jax_and_a_loop(keys3):
    n = plax.vmap(lambda k: random.normal(k, (2,)))(keys3)
    np.testing.assert_allclose(np.asarray(n), VMAP_NORMAL, rtol=0, atol=0)
    loop = [as_list(random.normal(keys3[i], (2,))) for i in range(3)]
    assert as_list(n) == loop
    s = plax.vmap(random.split)(keys3)
    assert is_key(s, (3, 2)) and data(s) == VMAP_SPLIT
    f = plax.vmap(random.fold_in)(keys3, jnp.arange(3, dtype=jnp.uint32))
    assert is_key(f, (3,)) and data(f) == VMAP_FOLD


def test_vmap_legacy_keys_equal_typed_keys(keys3):
    legacy = random.key_data(keys3)
    n = plax.vmap(lambda k: random.normal(k, (2,)))(legacy)
    np.testing.assert_array_equal(np.asarray(n), np.array(VMAP_NORMAL, np.float32))
    s = plax.vmap(random.split)(legacy)
    assert s.dtype == np.uint32 and as_list(s) == VMAP_SPLIT


def test_vmap_in_axes_and_out_axes_on_key_arrays():
    ks = random.split(random.key(0), (2, 3))
    # map over axis 1 of a (2, 3) key array; each call sees a (2,) key array
    out = plax.vmap(lambda k: k, in_axes=1, out_axes=0)(ks)
    assert is_key(out, (3, 2)) and data(out) == data(ks.T)
    bits = plax.vmap(lambda k: prng.random_bits(k, 32, (2,)), in_axes=1)(ks)
    assert bits.shape == (3, 2, 2)
    want = [as_list(prng.random_bits(ks[:, j], 32, (2,))) for j in range(3)]
    assert as_list(bits) == want
    out1 = plax.vmap(random.split, out_axes=1)(ks[0])
    assert is_key(out1, (2, 3))
    assert data(out1) == data(jnp.swapaxes(plax.vmap(random.split)(ks[0]), 0, 1))
    # a key with in_axes=None next to a batched int
    f = plax.vmap(random.fold_in, in_axes=(None, 0))(random.key(42), jnp.array([7, 7], jnp.uint32))
    assert data(f) == [FOLD_42_7, FOLD_42_7]


def test_nested_vmap_over_a_key_grid():
    ks = random.split(random.key(0), (2, 3))
    u = plax.vmap(plax.vmap(lambda k: random.uniform(k)))(ks)
    want = [[float(random.uniform(ks[i, j])) for j in range(3)] for i in range(2)]
    assert u.shape == (2, 3) and as_list(u) == want


def test_scan_carrying_a_key():
    def body(k, _):
        k, sub = random.split(k)
        return k, random.uniform(sub)
    kf, ys = lax.scan(body, random.key(42), None, length=4)
    assert is_key(kf, ()) and data(kf) == SCAN_KEY and as_list(ys) == SCAN_YS
    kl, ysl = lax.scan(body, random.PRNGKey(42), None, length=4)
    assert kl.dtype == np.uint32 and as_list(kl) == SCAN_KEY and as_list(ysl) == SCAN_YS


def test_scan_with_keys_as_xs_and_ys(keys3):
    def body(c, k):
        return c + random.normal(k, (2,)).sum(), random.fold_in(k, 1)
    c, ys = lax.scan(body, jnp.float32(0.0), keys3)
    assert is_key(ys, (3,))
    assert data(ys) == [data(random.fold_in(keys3[i], 1)) for i in range(3)]
    np.testing.assert_allclose(float(c), np.sum(VMAP_NORMAL), rtol=1e-6)


def test_fori_loop_and_while_loop_with_keys():
    k = lax.fori_loop(0, 3, lambda i, k: random.fold_in(k, i), random.key(42))
    assert is_key(k, ()) and data(k) == FORI_FOLD

    def body(state):
        i, k = state
        return i + 1, random.fold_in(k, i)
    i, k2 = lax.while_loop(lambda s: s[0] < 3, body, (jnp.int32(0), random.key(42)))
    assert int(i) == 3 and data(k2) == FORI_FOLD


def test_cond_and_switch_with_keys():
    k = random.key(42)
    f = plax.jit(lambda p, k: lax.cond(p, lambda k: random.fold_in(k, 7), lambda k: k, k))
    assert data(f(True, k)) == FOLD_42_7 and data(f(False, k)) == [0, 42]
    branches = [lambda k: k, lambda k: random.fold_in(k, 7), lambda k: random.split(k, 3)[0]]
    out = [data(lax.switch(i, branches, k)) for i in range(3)]
    assert out == [[0, 42], FOLD_42_7, SPLIT_42_3[0]]


def test_grad_with_a_key_argument():
    def f(x, k):
        return jnp.sum(x * random.normal(k, (3,)))
    g = plax.grad(f)(jnp.ones(3), random.key(42))
    np.testing.assert_array_equal(np.asarray(g), np.array(NORMAL_42, np.float32))
    v, g2 = plax.value_and_grad(f)(jnp.full(3, 2.0), random.key(42))
    np.testing.assert_allclose(float(v), 2 * sum(NORMAL_42), rtol=1e-6)
    with pytest.raises(TypeError, match="grad requires real- or complex-valued inputs"):
        plax.grad(f, argnums=1)(jnp.ones(3), random.key(42))


def test_checkpoint_with_keys():
    def f(x, k):
        return jnp.sum(jnp.sin(x) * random.normal(k, (3,)))
    x = jnp.array([0.1, 0.2, 0.3])
    g = plax.grad(plax.checkpoint(f))(x, random.key(42))
    want = np.cos(np.array([0.1, 0.2, 0.3], np.float32)) * np.array(NORMAL_42, np.float32)
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-6)
    ks = plax.checkpoint(lambda k: random.split(k, 3))(random.key(42))
    assert data(ks) == SPLIT_42_3


def test_device_put_keys():
    ks = random.split(random.key(42), 3)
    moved = plax.device_put(ks)
    assert is_key(moved, (3,)) and data(moved) == SPLIT_42_3
    devs = plax.devices()
    assert len(devs) == 8
    other = plax.device_put(ks, devs[3])
    assert is_key(other, (3,)) and data(other) == SPLIT_42_3
    assert other.devices() == {devs[3]}
    assert as_list(random.normal(plax.device_put(random.key(42), devs[5]), (3,))) == NORMAL_42


def test_eval_shape_and_shape_dtype_struct():
    s = plax.eval_shape(lambda k: random.split(k, 3), random.key(0))
    assert isinstance(s, plax.ShapeDtypeStruct)
    assert s.shape == (3,) and str(s.dtype) == KEY_DTYPE
    b = plax.eval_shape(lambda k: random.bits(k, (2, 5)), random.key(0))
    assert b.shape == (2, 5) and b.dtype == np.uint32
    d = plax.eval_shape(random.key_data, random.split(random.key(0), (2, 3)))
    assert d.shape == (2, 3, 2) and d.dtype == np.uint32


def test_make_jaxpr_shows_key_avals_and_primitives():
    text = str(plax.make_jaxpr(lambda k: random.bits(k, ()))(random.key(0)))
    assert "key<fry>[]" in text and "random_bits[bit_width=32 shape=()]" in text
    assert "random_wrap" not in text
    legacy = str(plax.make_jaxpr(lambda k: random.bits(k, ()))(random.PRNGKey(0)))
    assert "random_wrap[impl=fry]" in legacy and "u32[2]" in legacy
    split_text = str(plax.make_jaxpr(lambda k: random.split(k))(random.key(0)))
    assert "key<fry>[2]" in split_text and "random_split" in split_text


# --- shape ops on key arrays ----------------------------------------------------------------
def test_indexing_key_arrays():
    ks = random.split(random.key(0), 4)
    assert is_key(ks[0], ()) and data(ks[0]) == SPLIT_0_4[0]
    assert data(ks[-1]) == SPLIT_0_4[3]
    assert data(ks[1:3]) == SPLIT_0_4[1:3]
    assert data(ks[::2]) == SPLIT_0_4[::2]
    assert data(ks[::-1]) == SPLIT_0_4[::-1]
    assert data(ks[jnp.array([3, 0, 0])]) == [SPLIT_0_4[3], SPLIT_0_4[0], SPLIT_0_4[0]]
    assert data(ks[np.array([1, 2])]) == SPLIT_0_4[1:3]
    grid = random.split(random.key(42), (2, 2))
    assert data(grid[1, 0]) == SPLIT_42_2x2[1][0] and data(grid[:, 1]) == [
        SPLIT_42_2x2[0][1], SPLIT_42_2x2[1][1]]


def test_reshape_transpose_squeeze_expand_dims():
    ks = random.split(random.key(0), 4)
    r = ks.reshape(2, 2)
    assert is_key(r, (2, 2)) and data(r) == [SPLIT_0_4[:2], SPLIT_0_4[2:]]
    assert data(jnp.reshape(ks, (4, 1))) == [[row] for row in SPLIT_0_4]
    assert data(r.T) == [[SPLIT_0_4[0], SPLIT_0_4[2]], [SPLIT_0_4[1], SPLIT_0_4[3]]]
    assert data(jnp.transpose(r)) == data(r.T)
    assert data(jnp.transpose(r, (1, 0))) == data(r.T)
    e = jnp.expand_dims(ks, 0)
    assert is_key(e, (1, 4)) and is_key(jnp.squeeze(e), (4,))
    assert data(jnp.squeeze(e, 0)) == SPLIT_0_4
    assert is_key(jnp.expand_dims(random.key(1), -1), (1,))


def test_flip_swapaxes_broadcast_to():
    ks = random.split(random.key(0), 4)
    assert data(jnp.flip(ks)) == SPLIT_0_4[::-1]
    r = ks.reshape(2, 2)
    assert data(jnp.flip(r, 1)) == [[SPLIT_0_4[1], SPLIT_0_4[0]], [SPLIT_0_4[3], SPLIT_0_4[2]]]
    assert data(jnp.swapaxes(r, 0, 1)) == data(r.T)
    b = jnp.broadcast_to(random.key(42), (2, 3))
    assert is_key(b, (2, 3)) and data(b) == [[[0, 42]] * 3] * 2
    b2 = jnp.broadcast_to(ks[:2], (3, 2))
    assert data(b2) == [SPLIT_0_4[:2]] * 3


def test_stack_concatenate():
    a, b = random.key(1), random.key(2)
    s = jnp.stack([a, b])
    assert is_key(s, (2,)) and data(s) == [[0, 1], [0, 2]]
    assert data(jnp.stack([a, b], axis=0)[1]) == [0, 2]
    ks = random.split(random.key(0), 4)
    c = jnp.concatenate([ks[:1], ks[2:]])
    assert is_key(c, (3,)) and data(c) == [SPLIT_0_4[0]] + SPLIT_0_4[2:]
    grid = jnp.concatenate([ks.reshape(2, 2), ks.reshape(2, 2)], axis=1)
    assert is_key(grid, (2, 4)) and data(grid[1]) == SPLIT_0_4[2:] * 2


def test_where_and_select():
    ks = random.split(random.key(0), 4)
    other = jnp.broadcast_to(random.key(42), (4,))
    mask = jnp.array([True, False, False, True])
    w = jnp.where(mask, ks, other)
    want = [SPLIT_0_4[0], [0, 42], [0, 42], SPLIT_0_4[3]]
    assert is_key(w, (4,)) and data(w) == want
    assert data(lax.select(mask, ks, other)) == want
    assert data(jnp.where(True, random.key(3), random.key(4))) == [0, 3]


def test_dynamic_slice_and_update_slice():
    ks = random.split(random.key(0), 4)
    d = lax.dynamic_slice(ks, (jnp.int32(1),), (2,))
    assert is_key(d, (2,)) and data(d) == SPLIT_0_4[1:3]
    u = lax.dynamic_update_slice(ks, jnp.stack([random.key(7)]), (jnp.int32(2),))
    assert is_key(u, (4,)) and data(u) == SPLIT_0_4[:2] + [[0, 7]] + SPLIT_0_4[3:]
    j = plax.jit(lambda ks, i: lax.dynamic_slice(ks, (i,), (1,)))(ks, jnp.int32(3))
    assert data(j) == [SPLIT_0_4[3]]


def test_at_set():
    ks = random.split(random.key(0), 4)
    out = ks.at[1].set(random.key(9))
    assert is_key(out, (4,)) and data(out) == [SPLIT_0_4[0], [0, 9]] + SPLIT_0_4[2:]
    assert data(ks) == SPLIT_0_4  # unchanged
    out2 = plax.jit(lambda ks, k: ks.at[-1].set(k))(ks, random.key(5))
    assert data(out2) == SPLIT_0_4[:3] + [[0, 5]]


def test_equality_compares_whole_keys():
    ks = random.split(random.key(0), 3)
    eq = ks == ks[jnp.array([0, 0, 2])]
    assert eq.dtype == np.bool_ and as_list(eq) == [True, False, True]
    assert as_list(ks != ks[::-1]) == [True, False, True]
    # keys sharing one data word are still different keys
    a = random.wrap_key_data(jnp.array([0, 1], jnp.uint32))
    b = random.wrap_key_data(jnp.array([0, 2], jnp.uint32))
    assert not bool(a == b) and bool(a != b) and bool(a == random.key(1))
    assert as_list(plax.jit(lambda x, y: x == y)(ks, ks)) == [True] * 3


def test_zeros_like_copy_iteration_len():
    z = jnp.zeros_like(random.key(5))
    assert is_key(z, ()) and data(z) == [0, 0]
    ks = random.split(random.key(0), 4)
    assert is_key(jnp.zeros_like(ks), (4,)) and data(jnp.zeros_like(ks)) == [[0, 0]] * 4
    c = ks.copy()
    assert is_key(c, (4,)) and data(c) == SPLIT_0_4
    assert data(jnp.copy(ks)) == SPLIT_0_4
    assert len(ks) == 4
    items = list(ks)
    assert len(items) == 4 and all(is_key(k, ()) for k in items)
    assert [data(k) for k in items] == SPLIT_0_4
    assert ks.size == 4 and ks.ndim == 1


def test_shape_ops_under_jit_and_vmap():
    ks = random.split(random.key(0), 4)
    f = plax.jit(lambda ks: jnp.concatenate([ks[::-1].reshape(2, 2).T.reshape(4), ks[:1]]))
    out = f(ks)
    assert data(out) == [SPLIT_0_4[3], SPLIT_0_4[1], SPLIT_0_4[2], SPLIT_0_4[0], SPLIT_0_4[0]]
    pairs = plax.vmap(lambda k: jnp.stack([k, random.fold_in(k, 7)]))(
        jnp.broadcast_to(random.key(42), (2,)))
    assert is_key(pairs, (2, 2)) and data(pairs) == [[[0, 42], FOLD_42_7]] * 2


# --- errors ---------------------------------------------------------------------------------
def test_arithmetic_on_keys_is_a_type_error():
    k = random.key(0)
    with pytest.raises(TypeError, match="does not accept dtypes key<fry>"):
        k + 1
    with pytest.raises(TypeError, match="neg does not accept dtype key<fry>"):
        -k
    with pytest.raises(TypeError, match="lt does not accept dtype key<fry>"):
        k < k
    with pytest.raises(TypeError, match="does not accept dtype key<fry>"):
        random.split(k, 3).sum()


def test_conversions_of_keys_are_type_errors():
    k = random.key(0)
    with pytest.raises(TypeError, match="PRNGKey dtype cannot be converted to a NumPy array"):
        np.asarray(k)
    with pytest.raises(TypeError, match="convert_element_type cannot convert key<fry>"):
        k.astype(jnp.uint32)


def test_errors_inside_jit():
    with pytest.raises(TypeError, match="does not accept dtypes key<fry>"):
        plax.jit(lambda k: k + 1)(random.key(0))
    with pytest.raises(TypeError, match="neg does not accept dtype key<fry>"):
        plax.vmap(lambda k: -k)(random.split(random.key(0), 2))


# --- more transformations and shape ops, against JAX's values on split(key(0), (2, 3)) -------
GRID = [[[1797259609, 2579123966], [928981903, 3453687069], [4146024105, 2718843009]],
        [[2467461003, 3840466878], [2285895361, 433833334], [1524306142, 1887795613]]]
VMAP_OUT_LAST = [[[4165894930, 804218099], [346279018, 360566543], [2799984767, 1105366846]],
                 [[1353695780, 2116000888], [3968330031, 3923691647], [3777617834, 145086855]]]
PRIM_BITS8_GRID = [[[225, 92], [101, 80], [65, 45]], [[106, 238], [240, 189], [105, 85]]]
PRIM_FOLD4_GRID = [[[1213420782, 2034885899], [2566685366, 2716172981], [2161395221, 623395531]],
                   [[587919430, 558247730], [1430607176, 1139992838], [4051927373, 655605759]]]
SPLIT_3_2x3 = [[[3716834203, 3481239269], [1946498123, 2217676430], [1024511538, 2603795180]],
               [[877192987, 3448417067], [1363109171, 377266333], [2464363587, 131619366]]]
# vmap over GRID[0] (the three keys split(key(0), 3)):
VMAP_GAMMA = [1.5650783777236938, 3.932621479034424, 2.0865793228149414]   # gamma(k, 2.0)
VMAP_PERM = [[0, 2, 1, 3], [0, 3, 1, 2], [3, 1, 0, 2]]                     # permutation(k, 4)
VMAP_CHOICE = [[1, 1], [2, 2], [4, 4]]                                     # choice(k, 5, (2,))
VMAP_CAT = [0, 2, 1]                                                       # categorical(k, 0s)
VMAP_BERN = [[False, True, True], [True, True, False], [False, False, True]]
VMAP_UNIFORM = [[0.26698946952819824, 0.733950138092041],  # jit(vmap(uniform(k, (2,)))) of
                [0.1536543369293213, 0.7290053367614746],  # GRID[1]
                [0.7380603551864624, 0.6253609657287598]]
VMAP_RANDINT_LEGACY = [[91, 61], [22, 22], [59, 34]]   # randint(k, (2,), 0, 100), legacy GRID[0]
SWITCH_VMAP = [[1797259609, 2579123966], [3968330031, 3923691647], [3777617834, 145086855]]
COND_VMAP = [[1353695780, 2116000888], [928981903, 3453687069], [3777617834, 145086855]]
WHILE_VMAP = [[1797259609, 2579123966], [346279018, 360566543], [3248216040, 3909608588]]
SCAN_REVERSE = [[2839387376, 2467677468], [3152301319, 792466127], [915694800, 1641710144]]


@pytest.fixture(scope="module")
def grid():
    return random.split(random.key(0), (2, 3))


def test_grid_and_primitives_on_a_2d_key_array(grid):
    assert is_key(grid, (2, 3)) and data(grid) == GRID
    b8 = prng.random_bits(grid, 8, (2,))
    assert b8.dtype == np.uint8 and b8.shape == (2, 3, 2) and as_list(b8) == PRIM_BITS8_GRID
    f = prng.random_fold_in(grid, jnp.full((2, 3), 4, jnp.uint32))
    assert is_key(f, (2, 3)) and data(f) == PRIM_FOLD4_GRID
    assert data(f[1, 2]) == data(random.fold_in(grid[1, 2], 4))
    s = prng.random_split(random.key(3), (2, 3))
    assert is_key(s, (2, 3)) and data(s) == SPLIT_3_2x3
    assert data(random.split(random.key(3), (2, 3))) == SPLIT_3_2x3
    assert is_key(random.split(random.key(0), 0), (0,))
    assert random.bits(random.key(0), (0,)).shape == (0,)


def test_vmap_negative_axes(grid):
    out = plax.vmap(lambda k: random.split(k), out_axes=-1)(grid[0])
    assert is_key(out, (2, 3)) and data(out) == VMAP_OUT_LAST
    b = plax.vmap(lambda k: random.bits(k[0]), in_axes=-1)(grid)
    assert as_list(b) == [3617712097, 31327077, 3875991361]
    assert as_list(b) == [as_list(random.bits(grid[0, j])) for j in range(3)]


def test_samplers_under_vmap_match_jax(grid):
    g = plax.vmap(lambda k: random.gamma(k, 2.0))(grid[0])
    np.testing.assert_allclose(np.asarray(g), VMAP_GAMMA, rtol=1e-6)
    assert as_list(plax.vmap(lambda k: random.permutation(k, 4))(grid[0])) == VMAP_PERM
    assert as_list(plax.vmap(lambda k: random.choice(k, 5, (2,)))(grid[0])) == VMAP_CHOICE
    assert as_list(plax.vmap(lambda k: random.categorical(k, jnp.zeros(3)))(grid[0])) == VMAP_CAT
    assert as_list(plax.vmap(lambda k: random.bernoulli(k, 0.5, (3,)))(grid[0])) == VMAP_BERN
    u = plax.jit(plax.vmap(lambda k: random.uniform(k, (2,))))(grid[1])
    assert as_list(u) == VMAP_UNIFORM
    legacy = random.key_data(grid[0])
    assert as_list(plax.vmap(lambda k: random.randint(k, (2,), 0, 100))(legacy)) == \
        VMAP_RANDINT_LEGACY
    assert data(plax.vmap(random.clone)(grid[0])) == GRID[0]


def test_vmap_of_key_making_and_unwrapping(grid):
    assert data(plax.vmap(random.key)(jnp.arange(3))) == [[0, 0], [0, 1], [0, 2]]
    assert as_list(plax.vmap(random.PRNGKey)(jnp.arange(3))) == [[0, 0], [0, 1], [0, 2]]
    assert as_list(plax.vmap(random.key_data)(grid[1])) == GRID[1]
    assert data(plax.vmap(random.wrap_key_data)(random.key_data(grid[1]))) == GRID[1]
    assert data(plax.vmap(lambda i: random.fold_in(random.key(42), i))(jnp.arange(2))) == \
        SPLIT_42_3[:2]
    assert data(plax.jit(random.key)(5)) == [0, 5]
    assert as_list(plax.jit(random.key_data)(grid[0])) == GRID[0]
    assert data(plax.jit(random.wrap_key_data)(jnp.array([1, 2], jnp.uint32))) == [1, 2]


def test_batched_control_flow_with_keys(grid):
    ks = grid[0]
    branches = [lambda k: k, lambda k: random.fold_in(k, 1)]
    sw = plax.vmap(lambda i, k: lax.switch(i, branches, k))(jnp.array([0, 1, 1]), ks)
    assert data(sw) == SWITCH_VMAP
    cd = plax.vmap(lambda p, k: lax.cond(p, lambda k: random.fold_in(k, 1), lambda k: k, k))(
        jnp.array([True, False, True]), ks)
    assert data(cd) == COND_VMAP

    def loop(n, k):
        return lax.while_loop(lambda s: s[0] < n,
                              lambda s: (s[0] + 1, random.fold_in(s[1], s[0])), (0, k))[1]
    assert data(plax.vmap(loop)(jnp.array([0, 1, 3]), ks)) == WHILE_VMAP
    legacy = lax.cond(True, lambda k: random.fold_in(k, 1), lambda k: k, random.PRNGKey(1))
    assert legacy.dtype == np.uint32 and as_list(legacy) == [1948878966, 4237131848]


def test_scan_reverse_and_2d_key_xs(grid):
    _, ys = lax.scan(lambda c, k: (c, random.fold_in(k, 2)), 0, grid[0], reverse=True)
    assert is_key(ys, (3,)) and data(ys) == SCAN_REVERSE
    _, bits = lax.scan(lambda c, k: (c, random.bits(k[1])), 0, grid)
    assert as_list(bits) == [31327077, 659940848]


def test_more_shape_ops(grid):
    assert is_key(grid[None], (1, 2, 3)) and data(grid[..., 1]) == [GRID[0][1], GRID[1][1]]
    assert data(grid[jnp.array([1, 0]), jnp.array([2, 2])]) == [GRID[1][2], GRID[0][2]]
    assert data(jnp.tile(grid[0, :2], 2)) == GRID[0][:2] * 2
    assert data(jnp.repeat(grid[0, :2], 2)) == [GRID[0][0]] * 2 + [GRID[0][1]] * 2
    assert data(jnp.moveaxis(grid, 0, -1)) == [list(p) for p in zip(GRID[0], GRID[1])]
    assert data(jnp.roll(grid[0], 1)) == [GRID[0][2], GRID[0][0], GRID[0][1]]
    assert data(jnp.take(grid[0], jnp.array([2, 0]))) == [GRID[0][2], GRID[0][0]]
    assert data(grid.ravel()) == GRID[0] + GRID[1]
    assert is_key(grid.reshape(-1), (6,)) and is_key(grid.flatten(), (6,))
    assert data(jnp.stack([grid[0], grid[1]], axis=1)) == [list(p) for p in zip(*GRID)]
    assert data(lax.select_n(jnp.array([0, 1, 0]), grid[0], grid[1])) == \
        [GRID[0][0], GRID[1][1], GRID[0][2]]
    dus = lax.dynamic_update_slice(grid, grid[1:2, :2], (0, 1))
    assert data(dus) == [[GRID[0][0]] + GRID[1][:2], GRID[1]]
    assert data(grid.at[0, 1:].set(random.key(8))) == [[GRID[0][0], [0, 8], [0, 8]], GRID[1]]
    assert data(plax.jit(lambda ks, i: ks[i])(grid[0], 2)) == GRID[0][2]
    assert as_list(grid == grid[0]) == [[True] * 3, [False] * 3]


def test_key_dtype_in_array_constructors(grid):
    assert data(jnp.zeros(3, grid.dtype)) == [[0, 0]] * 3
    assert data(jnp.ones_like(grid[0])) == [[1, 1]] * 3
    assert data(jnp.full_like(grid[0], 1)) == [[1, 1]] * 3
    assert data(jnp.empty_like(grid[0])) == [[0, 0]] * 3
    assert data(plax.jit(jnp.zeros_like)(grid[0])) == [[0, 0]] * 3
    assert data(jnp.array([random.key(1), random.key(2)])) == [[0, 1], [0, 2]]
    assert data(jnp.asarray(random.key(1))) == [0, 1]
    assert data(jnp.array(grid[0])) == GRID[0]
    assert grid.dtype.itemsize == 8 and grid.dtype.name == KEY_DTYPE
    assert grid.dtype == random.key(1).dtype and grid.dtype != np.uint32


def test_keys_through_jit_extras():
    k = random.key(42)
    assert data(plax.jit(lambda k: random.fold_in(k, 7), donate_argnums=0)(random.key(42))) == \
        FOLD_42_7
    g = plax.grad(plax.jit(lambda x, k: x * random.normal(k)))(1.0, k)
    assert float(g) == pytest.approx(NORMAL_42[0], rel=1e-6)
    assert data(lax.stop_gradient(random.key(3))) == [0, 3]
    assert data(random.key(1).block_until_ready()) == [0, 1]
    assert data(plax.device_get(random.key(1))) == [0, 1]
    assert data(random.key(3, impl="threefry2x32")) == [0, 3]
    _, vjp = plax.vjp(lambda x, k: x * random.normal(k, (2,)), 1.0, k)
    assert float(vjp(jnp.ones(2))[0]) == pytest.approx(NORMAL_42[0] + NORMAL_42[1], rel=1e-6)


def test_more_key_errors():
    k = random.key(0)
    with pytest.raises(TypeError, match="multiply does not accept dtypes key<fry>, int32"):
        k * 2
    with pytest.raises(TypeError, match="abs does not accept dtype key<fry>"):
        jnp.abs(k)
    with pytest.raises(TypeError, match="does not accept dtypes key<fry>, uint32"):
        jnp.concatenate([random.split(k, 2), random.PRNGKey(0)])
    with pytest.raises(TypeError, match="does not accept dtypes key<fry>, int32"):
        k == 0
    with pytest.raises(TypeError, match="expected key_data.dtype = uint32; got dtype=uint8"):
        random.wrap_key_data(jnp.zeros(2, jnp.uint8))
    with pytest.raises(TypeError, match="expected key_data.dtype = uint32; got dtype=int32"):
        random.wrap_key_data(jnp.zeros(2, jnp.int32))
    with pytest.raises(TypeError, match="PRNG key seed must be an integer"):
        random.key(1.5)
    with pytest.raises(TypeError, match="PRNG key seed must be an integer|given a PRNG key"):
        random.key(k)
    with pytest.raises(TypeError, match="unhashable type"):
        hash(k)
    with pytest.raises(TypeError, match="PRNGKey dtype cannot be converted to a NumPy array"):
        int(k)


def test_keys_are_refused_by_bitcast_matmul_and_sort():
    k = random.key(0)
    ks = random.split(k, 2)
    with pytest.raises(TypeError, match="bitcast_convert_type does not accept dtype key<fry>"):
        lax.bitcast_convert_type(k, jnp.uint32)
    with pytest.raises(TypeError, match="dot_general does not accept dtype key<fry>"):
        ks @ ks
    with pytest.raises(TypeError, match="sort does not accept dtype key<fry>"):
        jnp.sort(ks)


def test_comparing_keys_with_numbers_names_equal():
    k = random.key(0)
    with pytest.raises(TypeError, match="equal does not accept dtypes key<fry>, int32"):
        k == 0
    with pytest.raises(TypeError, match="not_equal does not accept dtypes key<fry>, uint32"):
        k != random.PRNGKey(0)
