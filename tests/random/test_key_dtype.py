"""plax.random.key_dtype: the dtype of typed keys of an implementation, as in JAX."""
import pytest

import plax
import plax.numpy as jnp


@pytest.mark.parametrize("spec, name", [(None, "key<fry>"), ("threefry2x32", "key<fry>"),
                                        ("rbg", "key<rbg>"), ("unsafe_rbg", "key<urbg>")])
def test_key_dtype_names_the_keys_dtype(spec, name):
    dt = plax.random.key_dtype(spec)
    assert str(dt) == name
    assert plax.random.key(0, impl=spec).dtype == dt
    assert jnp.issubdtype(dt, plax.dtypes.prng_key)


def test_key_dtype_takes_a_spec_and_refuses_unknown_names():
    k = plax.random.key(1, impl="rbg")
    assert plax.random.key_dtype(plax.random.key_impl(k)) == k.dtype
    with pytest.raises(ValueError, match='unrecognized PRNG implementation "nope". Did you '
                                         'mean one of: "threefry2x32"'):
        plax.random.key_dtype("nope")
