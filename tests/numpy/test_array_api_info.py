"""plax.numpy's array API inspection namespace (``__array_namespace_info__``) and the array
API's requirement that ``clip`` refuse complex values."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.core.config import enable_x64

_NARROW = {"bool": ["bool"], "signed integer": ["int8", "int16", "int32"],
           "unsigned integer": ["uint8", "uint16", "uint32"], "real floating": ["float32"],
           "complex floating": ["complex64"]}
_WIDE = {"signed integer": ["int64"], "unsigned integer": ["uint64"],
         "real floating": ["float64"], "complex floating": ["complex128"]}


def _expected(kinds, x64):
    groups = {"integral": ("signed integer", "unsigned integer"),
              "numeric": ("signed integer", "unsigned integer", "real floating",
                          "complex floating")}
    names = []
    for kind in kinds:
        for k in groups.get(kind, (kind,)):
            names += _NARROW[k] + (_WIDE.get(k, []) if x64 else [])
    return {n: np.dtype(n) for n in names}


def test_capabilities_and_devices():
    info = jnp.__array_namespace_info__()
    assert info.capabilities() == {"boolean indexing": False, "data-dependent shapes": False,
                                   "max dimensions": 64}
    assert info.default_device() is None
    devices = info.devices()
    assert devices[0] is None and set(plax.devices()) <= set(devices[1:])


@pytest.mark.parametrize("x64", [False, True])
def test_default_dtypes(x64):
    with enable_x64(x64):
        i, f, c = (("int64", "float64", "complex128") if x64 else
                   ("int32", "float32", "complex64"))
        want = {"real floating": np.dtype(f), "complex floating": np.dtype(c),
                "integral": np.dtype(i), "indexing": np.dtype(i)}
        info = jnp.__array_namespace_info__()
        assert info.default_dtypes() == want
        assert info.default_dtypes(device=plax.devices()[0]) == want


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("kind, kinds", [
    ("bool", ["bool"]), ("signed integer", ["signed integer"]),
    ("real floating", ["real floating"]), ("integral", ["integral"]),
    ("numeric", ["numeric"]), (None, ["numeric", "bool"]),
    (("real floating", "complex floating"), ["real floating", "complex floating"]),
    (("integral", "bool"), ["integral", "bool"])])
def test_dtypes_by_kind(kind, kinds, x64):
    with enable_x64(x64):
        assert jnp.__array_namespace_info__().dtypes(kind=kind) == _expected(kinds, x64)


@pytest.mark.parametrize("kwargs, err, match", [
    ({"kind": "nonsense"}, ValueError, "Unknown dtype kind 'nonsense'"),
    ({"kind": ("bool", 3)}, ValueError, "Unknown dtype kind 3"),
    ({"device": "cpu"}, TypeError, "device must be None or a plax Device"),
])
def test_dtypes_bad_arguments(kwargs, err, match):
    with pytest.raises(err, match=match):
        jnp.__array_namespace_info__().dtypes(**kwargs)


@pytest.mark.parametrize("args", [
    (jnp.arange(3.0) + 0j,), (np.arange(3) + 0j,), (jnp.arange(3), -1 + 5j),
    (jnp.arange(3), None, np.complex64(3))])
def test_clip_refuses_complex_values(args):
    with pytest.raises(ValueError, match="Complex values have no ordering"):
        jnp.clip(*args)


def test_clip_of_real_values_is_numpys():
    x = np.array([-2.0, 0.5, 3.0], np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.clip(x, -1, 1)), np.clip(x, -1, 1))
