"""Bad input raises the exception type JAX raises, with JAX's key phrase.

Users catch errors by type and search for them by message, so each row below
records, as a fact about JAX 0.10.2, the type it raises for that bad input and
a phrase of its message. Each row's callable takes the namespaces
``(p, jnp, lax)`` = (plax, plax.numpy, plax.lax), so the same table can be run
against JAX itself to check the facts.
"""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax


def _masked():
    return np.ma.array([1, 2, 3], mask=[True, False, True])


def ones(jnp, *shape, dtype=np.float32):
    return jnp.ones(shape, dtype)


def _gather_dnums(lax):
    return lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,),
                                      start_index_map=(0,))


# (id, callable(p, jnp, lax), exception type JAX raises, phrase of the message)
CASES = [
    # --- elementwise ops on shapes that do not broadcast: lax raises TypeError -----------
    ("jnp.add shapes", lambda p, jnp, lax: jnp.add(ones(jnp, 2), ones(jnp, 3)),
     TypeError, "incompatible shapes for broadcasting"),
    ("jnp.multiply shapes", lambda p, jnp, lax: jnp.multiply(ones(jnp, 2, 3), ones(jnp, 4, 3)),
     TypeError, "incompatible shapes for broadcasting"),
    ("operator + shapes", lambda p, jnp, lax: ones(jnp, 2) + ones(jnp, 3),
     TypeError, "incompatible shapes for broadcasting"),
    ("jnp.clip shapes", lambda p, jnp, lax: jnp.clip(ones(jnp, 3), ones(jnp, 2), ones(jnp, 4)),
     TypeError, "incompatible shapes for broadcasting"),
    ("make_jaxpr of add shapes",
     lambda p, jnp, lax: p.make_jaxpr(lambda x: x + ones(jnp, 3))(ones(jnp, 4)),
     TypeError, "incompatible shapes for broadcasting"),
    ("lax.add shapes", lambda p, jnp, lax: lax.add(ones(jnp, 2), ones(jnp, 3)),
     TypeError, "incompatible shapes for broadcasting"),
    # shapes of different ranks fail in jnp's broadcasting first, with a ValueError
    ("jnp.add ranks", lambda p, jnp, lax: jnp.add(ones(jnp, 2, 3), ones(jnp, 4)),
     ValueError, r"Incompatible shapes for broadcasting: shapes=\[\(2, 3\), \(4,\)\]"),
    ("lax.add dtypes", lambda p, jnp, lax: lax.add(ones(jnp, 2), ones(jnp, 2, dtype=np.int32)),
     TypeError, "requires arguments to have the same dtypes"),
    # ... but broadcast_shapes / broadcast_to / where stay ValueErrors
    ("jnp.broadcast_shapes", lambda p, jnp, lax: jnp.broadcast_shapes((2,), (3,)),
     ValueError, "Incompatible shapes for broadcasting"),
    ("jnp.broadcast_to", lambda p, jnp, lax: jnp.broadcast_to(ones(jnp, 3), (4,)),
     ValueError, "for broadcasting"),
    ("jnp.where shapes",
     lambda p, jnp, lax: jnp.where(ones(jnp, 2, dtype=bool), ones(jnp, 3), ones(jnp, 4)),
     ValueError, "Incompatible shapes for broadcasting"),
    # --- reshape ---------------------------------------------------------------------------
    ("jnp.reshape size", lambda p, jnp, lax: jnp.reshape(ones(jnp, 6), (4,)),
     TypeError, r"cannot reshape array of shape \(6,\)"),
    ("jnp.reshape two -1", lambda p, jnp, lax: jnp.reshape(ones(jnp, 6), (-1, -1)),
     TypeError, "can only specify one unknown axis size"),
    ("lax.reshape size", lambda p, jnp, lax: lax.reshape(ones(jnp, 6), (4,)),
     ValueError, r"(total size must be unchanged|doesn't match expected number of elements)"),
    ("lax.reshape negative", lambda p, jnp, lax: lax.reshape(ones(jnp, 6), (-1, 6)),
     TypeError, "reshape new_sizes must all be"),
    # --- concatenate / stack / split ---------------------------------------------------------
    ("jnp.concatenate ranks", lambda p, jnp, lax: jnp.concatenate([ones(jnp, 2), ones(jnp, 2, 2)]),
     TypeError, "different numbers of dimensions"),
    ("jnp.concatenate shapes",
     lambda p, jnp, lax: jnp.concatenate([ones(jnp, 2, 3), ones(jnp, 2, 4)], axis=0),
     TypeError, "differ in dimensions other than the one being concatenated"),
    ("jnp.concatenate empty", lambda p, jnp, lax: jnp.concatenate([]),
     ValueError, "Need at least one array to concatenate"),
    ("lax.concatenate empty", lambda p, jnp, lax: lax.concatenate([], 0),
     ValueError, "concatenate requires a non-empty"),
    ("jnp.stack shapes", lambda p, jnp, lax: jnp.stack([ones(jnp, 2), ones(jnp, 3)]),
     ValueError, "All input arrays must have the same shape"),
    ("jnp.split unequal", lambda p, jnp, lax: jnp.split(ones(jnp, 5), 2),
     ValueError, "array split does not result in an equal division"),
    # --- axis out of bounds: JAX raises ValueError or IndexError depending on the function;
    # plax raises NumPy's AxisError, which is both.
    ("jnp.sum axis", lambda p, jnp, lax: jnp.sum(ones(jnp, 3), axis=2), ValueError, "out of bounds"),
    # (JAX's IndexErrors here say "tuple index out of range")
    ("jnp.split axis", lambda p, jnp, lax: jnp.split(ones(jnp, 4), 2, axis=1),
     IndexError, "out of (bounds|range)"),
    ("jnp.argmax axis", lambda p, jnp, lax: jnp.argmax(ones(jnp, 3), axis=1),
     IndexError, "out of (bounds|range)"),
    ("jnp.mean axis", lambda p, jnp, lax: jnp.mean(ones(jnp, 3), axis=1),
     IndexError, "out of (bounds|range)"),
    ("jnp.swapaxes axis", lambda p, jnp, lax: jnp.swapaxes(ones(jnp, 2, 3), 0, 5),
     IndexError, "out of bounds"),
    ("jnp.expand_dims axis", lambda p, jnp, lax: jnp.expand_dims(ones(jnp, 2), 5),
     ValueError, "out of bounds"),
    # --- products ----------------------------------------------------------------------------
    ("jnp.matmul contract", lambda p, jnp, lax: jnp.matmul(ones(jnp, 2, 3), ones(jnp, 4, 5)),
     TypeError, "dot_general requires contracting dimensions to have the same shape"),
    ("jnp.matmul scalar", lambda p, jnp, lax: jnp.matmul(ones(jnp), ones(jnp, 3)),
     ValueError, "must have ndim at least 1"),
    ("jnp.dot contract", lambda p, jnp, lax: jnp.dot(ones(jnp, 3), ones(jnp, 4)),
     TypeError, "dot_general requires contracting dimensions to have the same shape"),
    ("jnp.einsum sizes",
     lambda p, jnp, lax: jnp.einsum("ij,jk->ik", ones(jnp, 2, 3), ones(jnp, 4, 5)),
     ValueError, "does not match previous terms"),
    ("lax.dot_general dims",
     lambda p, jnp, lax: lax.dot_general(ones(jnp, 2, 3), ones(jnp, 3, 5), (((2,), (0,)), ((), ()))),
     TypeError, "dot_general requires lhs dimension numbers to be nonnegative"),
    # --- transpose / squeeze -------------------------------------------------------------------
    ("jnp.transpose perm", lambda p, jnp, lax: jnp.transpose(ones(jnp, 2, 3), (0, 0)),
     TypeError, "isn't a permutation of operand dimensions"),
    ("lax.transpose perm", lambda p, jnp, lax: lax.transpose(ones(jnp, 2, 3), (0,)),
     TypeError, "isn't a permutation of operand dimensions"),
    ("jnp.squeeze size", lambda p, jnp, lax: jnp.squeeze(ones(jnp, 2, 3), 0),
     ValueError, "cannot select an axis to squeeze out which has size not equal to one"),
    # --- take / indexing -------------------------------------------------------------------------
    ("jnp.take float indices", lambda p, jnp, lax: jnp.take(ones(jnp, 3), ones(jnp, 2)),
     ValueError, "indices must have an integer type"),
    ("jnp.take raise mode", lambda p, jnp, lax: jnp.take(ones(jnp, 3), np.array([0]), mode="raise"),
     NotImplementedError, "'raise' mode to"),
    ("index too many", lambda p, jnp, lax: ones(jnp, 3)[0, 0],
     IndexError, "Too many indices"),
    ("index a scalar", lambda p, jnp, lax: ones(jnp)[0], IndexError, "Too many indices"),
    ("index too many under jit", lambda p, jnp, lax: p.jit(lambda x: x[0, 0])(ones(jnp, 3)),
     IndexError, "Too many indices"),
    ("at[] on a scalar", lambda p, jnp, lax: ones(jnp).at[0].set(1.0),
     IndexError, "Too many indices"),
    ("index with a float", lambda p, jnp, lax: ones(jnp, 3)[1.5],
     TypeError, "Indexer must have integer or boolean type"),
    ("index with a string", lambda p, jnp, lax: ones(jnp, 3)["a"],
     TypeError, "does not support string indexing"),
    ("two ellipses", lambda p, jnp, lax: ones(jnp, 3)[..., ...],
     IndexError, "an index can only have a single ellipsis"),
    ("item assignment", lambda p, jnp, lax: ones(jnp, 3).__setitem__(0, 1.0),
     TypeError, "arrays are immutable and do not support in-place item assignment"),
    # --- lax slicing -----------------------------------------------------------------------------
    ("lax.slice rank", lambda p, jnp, lax: lax.slice(ones(jnp, 5), (0, 0), (1, 1)),
     ValueError, "(start_indices must have length equal|safe_map)"),
    ("lax.slice limit", lambda p, jnp, lax: lax.slice(ones(jnp, 5), (0,), (7,)),
     TypeError, "must be less than or equal to operand shape"),
    ("lax.dynamic_slice rank", lambda p, jnp, lax: lax.dynamic_slice(ones(jnp, 5), (0, 0), (1, 1)),
     ValueError, "Length of slice indices must match number of operand dimensions"),
    ("lax.dynamic_update_slice rank",
     lambda p, jnp, lax: lax.dynamic_update_slice(ones(jnp, 2, 3), ones(jnp, 2, 3), (0,)),
     ValueError, "Length of slice indices must match number of operand dimensions"),
    ("lax.dynamic_slice size", lambda p, jnp, lax: lax.dynamic_slice(ones(jnp, 5), (0,), (7,)),
     TypeError, "slice_sizes must be less than or equal to operand shape"),
    ("lax.gather collapsed size",
     lambda p, jnp, lax: lax.gather(ones(jnp, 5), np.zeros((1, 1), np.int32), _gather_dnums(lax),
                                    slice_sizes=(2,)),
     TypeError, "Gather op can only"),
    ("lax.gather float indices",
     lambda p, jnp, lax: lax.gather(ones(jnp, 5), np.zeros((1, 1), np.float32), _gather_dnums(lax),
                                    slice_sizes=(1,)),
     ValueError, "indices must have an integer type"),
    # --- broadcast_in_dim / negative sizes ---------------------------------------------------------
    ("lax.broadcast_in_dim shape",
     lambda p, jnp, lax: lax.broadcast_in_dim(ones(jnp, 3), (4,), (0,)),
     TypeError, "operand dimension sizes must either be 1, or be equal"),
    ("lax.broadcast_in_dim negative", lambda p, jnp, lax: lax.broadcast_in_dim(ones(jnp), (-1,), ()),
     TypeError, "shape must have every element be nonnegative"),
    ("jnp.zeros negative", lambda p, jnp, lax: jnp.zeros((-1,)),
     TypeError, "must have every element be nonnegative"),
    ("jnp.ones negative", lambda p, jnp, lax: jnp.ones((2, -3)),
     TypeError, "must have every element be nonnegative"),
    ("jnp.full_like negative", lambda p, jnp, lax: jnp.full_like(ones(jnp, 2), 1.0, shape=(-1,)),
     TypeError, "must have every element be nonnegative"),
    ("lax.full negative", lambda p, jnp, lax: lax.full((-2,), 1.0),
     TypeError, "must have every element be nonnegative"),
    ("lax.iota negative", lambda p, jnp, lax: lax.iota(np.int32, -1),
     TypeError, "shape must have every element be nonnegative"),
    ("jnp.eye negative", lambda p, jnp, lax: jnp.eye(-1),
     ValueError, "negative dimensions are not allowed"),
    # --- shapes that are not integer sequences ---------------------------------------------------
    ("jnp.zeros float shape", lambda p, jnp, lax: jnp.zeros(2.5),
     TypeError, "Shapes must be 1D sequences of concrete values of integer type"),
    ("jnp.zeros str shape", lambda p, jnp, lax: jnp.zeros((2, "a")),
     TypeError, "Shapes must be 1D sequences of concrete values of integer type"),
    ("jit zeros(n)", lambda p, jnp, lax: p.jit(lambda n: jnp.zeros(n))(3),
     TypeError, "Shapes must be 1D sequences of concrete values of integer type"),
    ("jit ones(x.sum())",
     lambda p, jnp, lax: p.jit(lambda x: jnp.ones((x.sum(),)))(ones(jnp, 3, dtype=np.int32)),
     TypeError, "Shapes must be 1D sequences of concrete values of integer type"),
    ("jit reshape traced", lambda p, jnp, lax: p.jit(lambda x, n: x.reshape(n, -1))(ones(jnp, 6), 2),
     TypeError, "Shapes must be 1D sequences of concrete values of integer type"),
    ("jit lax.reshape traced",
     lambda p, jnp, lax: p.jit(lambda x, n: lax.reshape(x, (n, 3)))(ones(jnp, 6), 2),
     TypeError, "Shapes must be 1D sequences of concrete values of integer type"),
    ("jit lax.iota traced", lambda p, jnp, lax: p.jit(lambda n: lax.iota(np.int32, n))(3),
     TypeError, "Shapes must be 1D sequences of concrete values of integer type"),
    ("jit lax.full traced", lambda p, jnp, lax: p.jit(lambda n: lax.full((n,), 1.0))(3),
     TypeError, "Shapes must be 1D sequences of concrete values of integer type"),
    # --- reductions --------------------------------------------------------------------------------
    ("jnp.max empty", lambda p, jnp, lax: jnp.max(jnp.ones((0,))),
     ValueError, "zero-size array to reduction operation max which has no identity"),
    ("lax.reduce_sum axes", lambda p, jnp, lax: lax.reduce_sum(ones(jnp, 3), (1,)),
     ValueError, r"reduction axes \(1,\) contain"),
    ("lax.argmax index dtype", lambda p, jnp, lax: lax.argmax(ones(jnp, 3), 0, np.float32),
     TypeError, "index_dtype must be an integer type"),
    # --- select_n -----------------------------------------------------------------------------------
    ("lax.select_n case shapes",
     lambda p, jnp, lax: lax.select_n(ones(jnp, 3, dtype=bool), ones(jnp, 3), ones(jnp, 4)),
     TypeError, "cases must have the same shapes"),
    ("lax.select_n which dtype", lambda p, jnp, lax: lax.select_n(ones(jnp, 3), ones(jnp, 3)),
     TypeError, "`which` must be"),
    ("lax.select_n no cases", lambda p, jnp, lax: lax.select_n(ones(jnp, 3, dtype=bool)),
     ValueError, "must have at least one case"),
    # --- dtypes that are not array types ----------------------------------------------------------
    ("jnp.array of strings", lambda p, jnp, lax: jnp.array(["a", "b"]),
     TypeError, "is not a valid JAX array type"),
    ("jnp.array of an object", lambda p, jnp, lax: jnp.array(object()),
     TypeError, "is not a valid JAX array type"),
    ("jnp.asarray of a str", lambda p, jnp, lax: jnp.asarray("abc"),
     TypeError, "is not a valid JAX array type"),
    ("device_put of a str array", lambda p, jnp, lax: p.device_put(np.array(["a"])),
     TypeError, "is not a valid JAX array type"),
    ("jnp.sin of a list", lambda p, jnp, lax: jnp.sin([1.0, 2.0]),
     TypeError, "sin requires ndarray or scalar arguments"),
    ("jnp.add of an object", lambda p, jnp, lax: jnp.add(ones(jnp, 2), object()),
     TypeError, "add requires ndarray or scalar arguments"),
    ("jit of a str", lambda p, jnp, lax: p.jit(lambda x: x)("abc"),
     TypeError, "Error interpreting argument to .* as an abstract array"),
    ("grad of a str", lambda p, jnp, lax: p.grad(lambda x: 1.0)("abc"),
     TypeError, "is not a valid JAX type"),
    ("jnp.zeros dtype object", lambda p, jnp, lax: jnp.zeros(3, dtype=object),
     TypeError, "only supports number"),
    ("astype bogus dtype", lambda p, jnp, lax: ones(jnp, 3).astype("bogus"), TypeError, "bogus"),
    ("jnp.astype bogus dtype", lambda p, jnp, lax: jnp.astype(ones(jnp, 3), "bogus"),
     TypeError, "bogus"),
    ("convert_element_type object",
     lambda p, jnp, lax: lax.convert_element_type(ones(jnp, 3), object),
     TypeError, "only supports number"),
    # --- jit arguments -------------------------------------------------------------------------------
    ("jit static_argnums range", lambda p, jnp, lax: p.jit(lambda x: x, static_argnums=5)(1.0),
     ValueError, r"static_argnums=\(5,\),? but only accepts 1 positional arguments"),
    ("jit donate_argnums range", lambda p, jnp, lax: p.jit(lambda x: x, donate_argnums=5)(1.0),
     ValueError, r"donate_argnums=\(5,\),? but only accepts 1 positional arguments"),
    ("jit static_argnames invalid", lambda p, jnp, lax: p.jit(lambda x: x, static_argnames="y"),
     ValueError, "invalid argnames"),
    ("jit donate_argnames invalid", lambda p, jnp, lax: p.jit(lambda x: x, donate_argnames="y"),
     ValueError, "invalid argnames"),
    ("jit unhashable static", lambda p, jnp, lax: p.jit(lambda x: x, static_argnums=0)(np.ones(2)),
     ValueError, "Non-hashable static arguments are not supported"),
    ("jit static_argnums str", lambda p, jnp, lax: p.jit(lambda x: x, static_argnums="x")(1),
     TypeError, "(static_argnums must be integers|cannot be interpreted as an integer)"),
    ("jit of a non-callable", lambda p, jnp, lax: p.jit(3), TypeError, "Expected a callable value"),
    # --- autodiff ---------------------------------------------------------------------------------------
    ("grad non-scalar output", lambda p, jnp, lax: p.grad(lambda x: x)(ones(jnp, 3)),
     TypeError, "Gradient only defined for scalar-output functions"),
    ("grad int input", lambda p, jnp, lax: p.grad(lambda x: x * 2)(1),
     TypeError, "grad requires real- or complex-valued inputs"),
    ("grad int output", lambda p, jnp, lax: p.grad(lambda x: x.astype(np.int32))(1.0),
     TypeError, "grad requires real-valued outputs"),
    ("grad argnums range", lambda p, jnp, lax: p.grad(lambda x: x, argnums=3)(1.0),
     TypeError, "requires at least 4 positional arguments"),
    ("jvp shapes", lambda p, jnp, lax: p.jvp(lambda x: x, (ones(jnp, 3),), (ones(jnp, 4),)),
     ValueError, "jvp called with different primal and tangent shapes"),
    ("jvp dtypes",
     lambda p, jnp, lax: p.jvp(lambda x: x, (ones(jnp, 3),), (ones(jnp, 3, dtype=np.float16),)),
     TypeError, "primal and tangent arguments to jax.jvp do not match"),
    ("vjp cotangent shape", lambda p, jnp, lax: p.vjp(lambda x: x, ones(jnp, 3))[1](ones(jnp, 4)),
     ValueError, r"unexpected (JAX )?type \(e\.g\. shape/dtype\)|unexpected type \(shape/dtype\)"),
    # --- vmap -------------------------------------------------------------------------------------------
    ("vmap axis too large", lambda p, jnp, lax: p.vmap(lambda x: x, in_axes=2)(ones(jnp, 3)),
     ValueError, "vmap was requested to map its argument along axis 2"),
    ("vmap sizes", lambda p, jnp, lax: p.vmap(lambda x, y: x + y)(ones(jnp, 3), ones(jnp, 4)),
     ValueError, "vmap got inconsistent sizes for array axes to be mapped"),
    ("vmap in_axes length", lambda p, jnp, lax: p.vmap(lambda x: x, in_axes=(0, 0))(ones(jnp, 3)),
     ValueError, "vmap in_axes must be an int, None, or a tuple of entries"),
    ("vmap in_axes str", lambda p, jnp, lax: p.vmap(lambda x: x, in_axes="a")(ones(jnp, 3)),
     TypeError, "vmap in_axes must be an int, None, or a tuple of entries"),
    ("vmap of a scalar", lambda p, jnp, lax: p.vmap(lambda x: x)(1.0),
     ValueError, "rank should be at least 1"),
    # --- devices -------------------------------------------------------------------------------------------
    ("device_put str device", lambda p, jnp, lax: p.device_put(ones(jnp, 2), "cpu"),
     ValueError, "device_put` only accepts|device_put only accepts"),
    ("device_put int device", lambda p, jnp, lax: p.device_put(ones(jnp, 2), 3),
     ValueError, "Received invalid value: 3"),
    ("device_put masked array", lambda p, jnp, lax: p.device_put(_masked()),
     ValueError, "numpy masked arrays are not supported"),
    ("asarray masked array", lambda p, jnp, lax: jnp.asarray(_masked()),
     ValueError, "numpy masked arrays are not supported"),
    ("jit of masked array", lambda p, jnp, lax: p.jit(lambda x: x)(_masked()),
     ValueError, "numpy masked arrays are not supported"),
    ("jnp.add of masked array", lambda p, jnp, lax: jnp.add(_masked(), 1),
     ValueError, "numpy masked arrays are not supported"),
    ("lax.add of masked array", lambda p, jnp, lax: lax.add(_masked(), _masked()),
     ValueError, "numpy masked arrays are not supported"),
    # --- pytrees ------------------------------------------------------------------------------------------
    ("tree_map lengths", lambda p, jnp, lax: p.tree_util.tree_map(lambda a, b: a, [1, 2], [1]),
     ValueError, "pytree structure error: different lengths of list"),
    ("tree_map types", lambda p, jnp, lax: p.tree_util.tree_map(lambda a, b: a, (1, 2), [1, 2]),
     ValueError, "pytree structure error: different types"),
    ("tree_unflatten count",
     lambda p, jnp, lax: p.tree_util.tree_unflatten(p.tree_util.tree_structure([1, 2]), [1]),
     ValueError, "Too few leaves for PyTreeDef"),
    # --- Python protocol conversions ----------------------------------------------------------------------
    ("float of an array", lambda p, jnp, lax: float(ones(jnp, 3)),
     TypeError, "(?i)only (0-dimensional|scalar) arrays can be converted to Python scalars"),
    ("bool of an array", lambda p, jnp, lax: bool(ones(jnp, 3)),
     ValueError, "The truth value of an array with more than one element is ambiguous"),
    ("len of a scalar", lambda p, jnp, lax: len(ones(jnp)), TypeError, "len\\(\\) of unsized object"),
    ("hash of an array", lambda p, jnp, lax: hash(ones(jnp, 3)), TypeError, "unhashable type"),
]


@pytest.mark.parametrize("fn,exc,match", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_raises_jax_exception_type(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn(plax, jnp, lax)


def test_case_ids_are_unique():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 60


def test_axis_errors_are_both_value_and_index_errors():
    # JAX raises ValueError for some functions and IndexError for others.
    with pytest.raises(ValueError, match="axis 3 is out of bounds for array of dimension 1"):
        jnp.cumsum(jnp.ones(3), axis=3)
    with pytest.raises(IndexError, match="axis 3 is out of bounds for array of dimension 1"):
        jnp.cumsum(jnp.ones(3), axis=3)


def test_item_assignment_error_is_raised_for_tracers_too():
    def f(x):
        x[0] = 1.0
        return x
    with pytest.raises(TypeError, match=r"in-place item assignment.*x\.at\[idx\]\.set\(y\)"):
        plax.jit(f)(jnp.ones(3))


def test_traced_shape_error_says_what_to_do():
    with pytest.raises(TypeError, match="static_argnums") as info:
        plax.jit(lambda n: jnp.zeros((n, 2)))(3)
    msg = str(info.value)
    assert "got shape=(traced i32[], 2)" in msg and "argument n" in msg
    # marking it static works
    out = plax.jit(lambda n: jnp.zeros((n, 2)), static_argnums=0)(3)
    np.testing.assert_array_equal(np.asarray(out), np.zeros((3, 2), np.float32))


def test_invalid_argnames_is_raised_when_jit_is_applied():
    with pytest.raises(ValueError, match=r"invalid argnames \{'y'\} in static_argnames"):
        plax.jit(lambda x: x, static_argnames=("y",))
    # functions taking **kwargs accept any name
    f = plax.jit(lambda x, **kw: x, static_argnames="y")
    assert float(f(1.0, y=2)) == 1.0


def test_jnp_astype():
    x = jnp.arange(4)
    out = jnp.astype(x, np.float32)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(out), np.arange(4, dtype=np.float32))
    assert x.astype(np.int8).dtype == np.int8
