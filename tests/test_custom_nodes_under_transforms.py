"""Custom pytree nodes whose unflatten function works on its children (validates them,
converts them with jnp.asarray, does arithmetic) under every transformation: plax rebuilds
such a node only from arrays or tracers, never around axis specs, shardings, avals or other
stand-ins (in_axes/out_axes prefixes, jit and shard_map shardings, loop carries, custom rules).
Each case records the types the node's unflatten saw."""
import dataclasses
import functools

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax, tree_util
from plax.sharding import Mesh, NamedSharding, PartitionSpec as P

F32 = np.float32
SEEN: list = []


def checked(children, who):
    """What a user's unflatten does: record, refuse anything but arrays, convert."""
    SEEN.extend((type(c), isinstance(c, (plax.Array, np.ndarray))) for c in children)
    for c in children:
        if not isinstance(c, (plax.Array, np.ndarray, plax.ShapeDtypeStruct)):
            raise TypeError(f"{who} children must be arrays, got {type(c).__name__}")
    return [c if isinstance(c, plax.ShapeDtypeStruct) else jnp.asarray(c) for c in children]


@tree_util.register_pytree_node_class
class Affine:
    def __init__(self, w, b):
        self.w, self.b = w, b

    def tree_flatten(self):
        return (self.w, self.b), "affine"

    @classmethod
    def tree_unflatten(cls, aux, children):
        w, b = checked(children, "Affine")
        return cls(w if isinstance(w, plax.ShapeDtypeStruct) else w * 1, b)


@pytest.fixture(autouse=True)
def _fresh_record():
    SEEN.clear()
    yield


def assert_only_arrays(allow=()):
    assert SEEN, "the node was never rebuilt"
    bad = [t for t, is_array in SEEN if not (is_array or issubclass(t, allow))]
    assert not bad, f"unflatten saw {bad}"


W = np.arange(6, dtype=F32).reshape(2, 3) / 4
B = np.array([1.0, -2.0, 0.5], F32)
BW, BB = np.stack([W, W + 1]), np.stack([B, 2 * B])
ONES_W, ONES_B = np.ones_like(W), np.ones_like(B)
N = min(2, len(plax.devices()))  # devices for shard_map / pmap (the suite also runs on 1)
NW = BW[:N]


def step(p):
    return Affine(p.w * 0.9, p.b + 1)


def loss(p):
    return jnp.sum(p.w ** 2) + jnp.sum(jnp.sin(p.b))


def mesh():
    return Mesh(np.array(plax.devices()[:N]), ("i",))


@plax.custom_jvp
def soft(p):
    return Affine(jnp.sin(p.w), p.b)


@soft.defjvp
def _soft_jvp(primals, tangents):
    (p,), (t,) = primals, tangents
    return soft(p), Affine(jnp.cos(p.w) * t.w, t.b)


@plax.custom_jvp
def scaled(p, s):
    return Affine(p.w * s, p.b * s)


scaled.defjvps(lambda tp, ans, p, s: Affine(tp.w * s, tp.b * s),
               lambda ts, ans, p, s: Affine(p.w * ts, p.b * ts))


@plax.custom_vjp
def clip(p):
    return Affine(jnp.clip(p.w, 0, 1), p.b)


clip.defvjp(lambda p: (clip(p), p), lambda r, g: (Affine(g.w * (r.w < 1), g.b * 3),))


@plax.custom_vjp
def times(p, z):
    return Affine(p.w * z, p.b)


times.defvjp(lambda p, z: (times(p, z), p), lambda r, g: (None, jnp.sum(g.w * r.w)))


def _custom_gradient(p):
    @plax.custom_gradient
    def f(p):
        return jnp.sum(p.w), lambda g: (Affine(g * jnp.ones_like(p.w), jnp.zeros_like(p.b)),)
    return plax.grad(f)(p)


def _with_constraint():
    m = mesh()
    spec = Affine(NamedSharding(m, P("i")), NamedSharding(m, P()))
    out = plax.jit(lambda p: lax.with_sharding_constraint(step(p), spec))(Affine(W, B))
    assert out.w.sharding.spec == (P("i") if N > 1 else P())  # (a size-1 axis splits nothing)
    return out


def _jit_shardings():
    m = mesh()
    spec = Affine(NamedSharding(m, P("i")), NamedSharding(m, P()))
    out = plax.jit(step, in_shardings=(spec,), out_shardings=spec)(Affine(W, B))
    assert out.w.sharding.spec == P("i") and out.b.sharding.spec == P()
    return out


def _device_put():
    devs = plax.devices()
    out = plax.device_put(Affine(W, B), Affine(devs[0], devs[-1]))
    assert out.b.devices() == {devs[-1]}
    return out


# (name, run, the expected leaves)
CASES = [
    ("vmap", lambda: plax.vmap(step)(Affine(BW, BB)), [BW * 0.9, BB + 1]),
    ("vmap in_axes prefix", lambda: plax.vmap(step, in_axes=(Affine(0, None),))(Affine(BW, B)),
     [BW * 0.9, np.broadcast_to(B + 1, (2, 3))]),
    ("vmap in_axes 1", lambda: plax.vmap(step, in_axes=1)(Affine(BW.transpose(1, 0, 2), BB.T)),
     [BW * 0.9, BB + 1]),
    ("vmap out_axes prefix", lambda: plax.vmap(step, out_axes=Affine(1, 0))(Affine(BW, BB)),
     [(BW * 0.9).transpose(1, 0, 2), BB + 1]),
    ("vmap out_axes None", lambda: plax.vmap(lambda x: Affine(x, jnp.asarray(B)),
                                             out_axes=Affine(0, None))(BW[:, 0]),
     [BW[:, 0], B]),
    ("vmap kwargs", lambda: plax.vmap(lambda *, p: step(p))(p=Affine(BW, BB)), [BW * 0.9, BB + 1]),
    ("jit", lambda: plax.jit(step)(Affine(W, B)), [W * 0.9, B + 1]),
    ("jit shardings", _jit_shardings, [W * 0.9, B + 1]),
    ("grad", lambda: plax.grad(loss)(Affine(W, B)), [2 * W, np.cos(B)]),
    ("value_and_grad aux", lambda: plax.value_and_grad(lambda p: (loss(p), step(p)),
                                                       has_aux=True)(Affine(W, B)),
     [np.sum(W ** 2) + np.sum(np.sin(B)), W * 0.9, B + 1, 2 * W, np.cos(B)]),
    ("jvp", lambda: plax.jvp(step, (Affine(W, B),), (Affine(ONES_W, ONES_B),)),
     [W * 0.9, B + 1, 0.9 * ONES_W, ONES_B]),
    ("vjp", lambda: plax.vjp(step, Affine(W, B))[1](Affine(ONES_W, ONES_B)),
     [0.9 * ONES_W, ONES_B]),
    ("linearize", lambda: plax.linearize(loss, Affine(W, B))[1](Affine(ONES_W, ONES_B)),
     [np.sum(2 * W) + np.sum(np.cos(B))]),
    ("eval_shape", lambda: plax.eval_shape(step, Affine(W, B)), None),
    ("scan", lambda: lax.scan(lambda c, x: (step(c), jnp.sum(c.w) * x), Affine(W, B),
                              jnp.arange(3.0)),
     [W * 0.9 ** 3, B + 3, np.sum(W) * 0.9 ** np.arange(3) * np.arange(3)]),
    ("scan over nodes", lambda: lax.scan(lambda c, q: (c + jnp.sum(q.b), step(q)), 0.0,
                                         Affine(BW, BB)),
     [np.sum(BB), BW * 0.9, BB + 1]),
    ("fori_loop", lambda: lax.fori_loop(0, 3, lambda i, c: step(c), Affine(W, B)),
     [W * 0.9 ** 3, B + 3]),
    ("while_loop", lambda: lax.while_loop(lambda c: c.b[0] < 3, step, Affine(W, B)),
     [W * 0.9 ** 2, B + 2]),
    ("cond", lambda: lax.cond(True, step, lambda c: c, Affine(W, B)), [W * 0.9, B + 1]),
    ("switch", lambda: lax.switch(1, [lambda c: c, step], Affine(W, B)), [W * 0.9, B + 1]),
    ("map batched", lambda: lax.map(step, Affine(np.stack([W] * 3), np.stack([B] * 3)),
                                    batch_size=2),
     [np.stack([W * 0.9] * 3), np.stack([B + 1] * 3)]),
    ("checkpoint", lambda: plax.grad(plax.checkpoint(loss))(Affine(W, B)), [2 * W, np.cos(B)]),
    ("jit of vmap of grad", lambda: plax.jit(plax.vmap(plax.grad(loss)))(Affine(BW, BB)),
     [2 * BW, np.cos(BB)]),
    ("custom_jvp grad", lambda: plax.grad(lambda p: jnp.sum(soft(p).w) + jnp.sum(soft(p).b))(
        Affine(W, B)), [np.cos(W), ONES_B]),
    ("custom_jvp vmap", lambda: plax.vmap(soft)(Affine(BW, BB)), [np.sin(BW), BB]),
    ("custom_jvp defjvps, a node with a zero tangent leaf",
     lambda: plax.grad(lambda w: jnp.sum(scaled(Affine(w, B), 2.0).w))(W), [2 * ONES_W]),
    ("custom_jvp defjvps grad of the scale",
     lambda: plax.grad(lambda s: jnp.sum(scaled(Affine(W, B), s).w))(2.0), [np.sum(W)]),
    ("custom_vjp grad", lambda: plax.grad(lambda p: jnp.sum(clip(p).w) + jnp.sum(clip(p).b))(
        Affine(W, B)), [(W < 1).astype(F32), 3 * ONES_B]),
    ("custom_vjp bwd None for a node", lambda: plax.grad(
        lambda z: jnp.sum(times(Affine(W, B), z).w))(2.0), [np.sum(W)]),
    ("custom_gradient", lambda: _custom_gradient(Affine(W, B)), [ONES_W, 0 * ONES_B]),
    ("shard_map", lambda: plax.shard_map(step, mesh=mesh(), in_specs=(Affine(P("i"), P()),),
                                         out_specs=Affine(P("i"), P()))(Affine(NW, B)),
     [NW * 0.9, B + 1]),
    ("pmap", lambda: plax.pmap(step, in_axes=(Affine(0, None),))(Affine(NW, B)),
     [NW * 0.9, np.broadcast_to(B + 1, (N, 3))]),
    ("with_sharding_constraint", _with_constraint, [W * 0.9, B + 1]),
    ("device_put", _device_put, [W, B]),
]


@pytest.mark.parametrize("name,run,want", CASES, ids=[c[0] for c in CASES])
def test_node_is_rebuilt_only_from_arrays(name, run, want):
    out = run()
    if want is None:  # eval_shape: its result nodes hold ShapeDtypeStructs, as in JAX
        assert isinstance(out, Affine) and out.w.shape == (2, 3) and out.b.shape == (3,)
        assert_only_arrays(allow=(plax.ShapeDtypeStruct,))
        return
    leaves = tree_util.tree_leaves(out)
    assert len(leaves) == len(want)
    for got, ref in zip(leaves, want):
        np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-6, atol=1e-6)
    assert_only_arrays()


# --- the registration forms, and key paths in structure errors ---------------------------------
class _Plain:
    def __init__(self, w, b):
        self.w, self.b = w, b


class _Keyed(_Plain):
    pass


@dataclasses.dataclass
class _Fields:
    w: object
    b: object

    def __post_init__(self):
        checked((self.w, self.b), "_Fields")  # validation in the constructor unflatten calls


tree_util.register_pytree_node(_Plain, lambda n: ((n.w, n.b), None),
                               lambda _, ch: _Plain(*checked(ch, "_Plain")))
tree_util.register_pytree_with_keys(
    _Keyed, lambda n: (((tree_util.GetAttrKey("w"), n.w), (tree_util.GetAttrKey("b"), n.b)), None),
    lambda _, ch: _Keyed(*checked(ch, "_Keyed")))
tree_util.register_dataclass(_Fields, data_fields=["w", "b"], meta_fields=[])

KINDS = [(Affine, "[<flat index 0>]"), (_Plain, "[<flat index 0>]"), (_Keyed, ".w"),
         (_Fields, ".w")]


@pytest.mark.parametrize("kind,first_key", KINDS, ids=[k.__name__ for k, _ in KINDS])
def test_every_registration_form(kind, first_key):
    def f(n):
        return kind(n.w * 2, n.b * 3)

    out = plax.vmap(f, out_axes=1)(kind(BW, BB))
    np.testing.assert_allclose(np.asarray(out.w), (2 * BW).transpose(1, 0, 2))
    np.testing.assert_allclose(np.asarray(out.b), (3 * BB).T)
    out = plax.jit(plax.grad(lambda n: jnp.sum(n.w * n.b[:2, None])))(kind(W, B))
    np.testing.assert_allclose(np.asarray(out.w), np.broadcast_to(B[:2, None], (2, 3)))
    np.testing.assert_allclose(np.asarray(out.b), [W[0].sum(), W[1].sum(), 0])
    carry, _ = lax.scan(lambda c, x: (f(c), None), kind(W, B), None, length=2)
    np.testing.assert_allclose(np.asarray(carry.w), 4 * W)
    out = plax.shard_map(f, mesh=mesh(), in_specs=P("i"), out_specs=P("i"))(kind(NW, BB[:N]))
    np.testing.assert_allclose(np.asarray(out.b), 3 * BB[:N])
    assert_only_arrays()
    key = first_key.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")
    with pytest.raises(TypeError, match=rf"input carry component c{key} has type float32"):
        lax.while_loop(lambda c: False, lambda c: kind(c.w.astype(np.int32), c.b), kind(W, B))
    assert all(is_array for _, is_array in SEEN), SEEN


def test_prefix_mismatch_errors_do_not_build_the_value():
    with pytest.raises(ValueError, match=r"vmap in_axes specification must be a tree prefix"
                                         r"(.|\n)*different types at key path"
                                         r"(.|\n)*holds a pytree leaf"):
        plax.vmap(step, in_axes=(Affine(0, (0, 0)),))(Affine(BW, BB))
    with pytest.raises(ValueError, match="vmap out_axes specification must be a tree prefix"):
        plax.vmap(step, out_axes=Affine((0, 0), 0))(Affine(BW, BB))
    with pytest.raises(ValueError, match="must be a pytree prefix of the outputs"):
        s = NamedSharding(mesh(), P())
        plax.jit(step, out_shardings=Affine(s, (s, s)))(Affine(W, B))
    assert all(is_array for _, is_array in SEEN), SEEN


def test_branch_type_errors_name_paths_without_stand_ins():
    with pytest.raises(TypeError, match=r"output of true_fun at path \[<flat index 0>\] has type "
                                        r"int32\[2,3\]"):
        lax.cond(True, lambda c: Affine(c.w.astype(np.int32), c.b), lambda c: c, Affine(W, B))
    assert all(is_array for _, is_array in SEEN), SEEN


def test_broadcast_prefix_counts_leaves_without_rebuilding():
    full = Affine(W, (B, None, {"k": B}))
    assert tree_util.broadcast_prefix(Affine(0, 1), full) == [0, 1, 1]
    assert tree_util.broadcast_prefix_to_treedef((None, 3), tree_util.tree_structure(
        (full, [B, B])), is_leaf=lambda x: x is None) == [None, None, None, 3, 3]
    assert tree_util.tree_broadcast((1, {"a": 2}), ((0, 0), {"a": [0, None, 0]})) == \
        ((1, 1), {"a": [2, None, 2]})
    assert tree_util.treedef_leaf_paths(tree_util.tree_structure(
        {"a": (B, Affine(W, B))})) == [
            (tree_util.DictKey("a"), tree_util.SequenceKey(0)),
            (tree_util.DictKey("a"), tree_util.SequenceKey(1), tree_util.FlattenedIndexKey(0)),
            (tree_util.DictKey("a"), tree_util.SequenceKey(1), tree_util.FlattenedIndexKey(1))]
    assert not SEEN
    with pytest.raises(ValueError, match=r"different types at key path\n    tree_broadcast tree"
                                         r"\[1\]"):
        tree_util.broadcast_prefix((0, (1, 2)), (W, B), name="tree_broadcast")
