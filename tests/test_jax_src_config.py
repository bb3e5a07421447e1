"""``jax._src.config`` (``plax._src.config``): JAX's flag objects over plax's flags: ``.value``,
context managers that change what plax does, flags defined with ``bool_state`` & co."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax._src import config


def test_enable_x64_state_changes_plax_arrays():
    assert config.enable_x64.value is False and config.enable_x64.name == "jax_enable_x64"
    with config.enable_x64(True):
        assert config.enable_x64.value is True
        assert jnp.arange(3.0).dtype == np.float64
    assert jnp.arange(3.0).dtype == np.float32


def test_numpy_rank_promotion_state_and_decorator():
    with config.numpy_rank_promotion("raise"):
        with pytest.raises(ValueError, match="jax_numpy_rank_promotion=.raise."):
            jnp.ones(2) + jnp.ones((2, 2))

    @config.numpy_rank_promotion("raise")
    def strict():
        return config.numpy_rank_promotion.value
    assert strict() == "raise" and config.numpy_rank_promotion.value == "allow"


def test_states_read_plax_flags_and_enums():
    assert config.use_simplified_jaxpr_constants.value is False
    assert config._check_vma.value is plax.config.read("check_vma")
    assert config.explicit_x64_dtypes.value == config.ExplicitX64Mode.WARN
    with config.explicit_x64_dtypes("allow"):
        assert config.explicit_x64_dtypes.value is config.ExplicitX64Mode.ALLOW
        assert plax.config.read("explicit_x64_dtypes") == "allow"
    assert config.numpy_dtype_promotion.value == "standard"
    assert len(config.trace_context_names()) == len(config.trace_context())
    assert config.config.values["jax_enable_x64"] is False
    with pytest.raises(TypeError, match="bool"):
        bool(config.enable_x64)


def test_a_state_plax_keeps_elsewhere_is_refused():
    with pytest.raises(AttributeError, match="mesh_context_manager is not provided by plax"):
        config.mesh_context_manager  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'no_such_flag'"):
        config.no_such_flag  # noqa: B018


def test_defining_states_and_flags():
    flag = config.bool_state(name="jax_plax_faces_test_bool", default=True, help="test")
    choice = config.enum_state(name="jax_plax_faces_test_enum", enum_values=["a", "b"],
                               default="a", help="test")
    with flag(False):
        assert flag.value is False
    with flag():  # a boolean state's block means True without a value
        assert flag.value is True
    plax.config.update("jax_plax_faces_test_enum", "b")
    assert choice.value == "b"
    with pytest.raises(ValueError, match="new enum value must be in"):
        plax.config.update("jax_plax_faces_test_enum", "c")
    assert choice.value == "b"
    with pytest.raises(Exception, match="already defined"):
        config.bool_state(name="jax_plax_faces_test_bool", default=True, help="again")
    count = config.int_flag("jax_plax_faces_test_count", 3, help="test")
    config.update("jax_plax_faces_test_count", 5)
    assert count.value == 5 and config._read("jax_plax_faces_test_count") == 5


def test_state_hooks_see_each_value():
    seen_global, seen_local = [], []
    state = config.int_state(name="jax_plax_faces_test_hooked", default=1, help="test",
                             update_global_hook=seen_global.append,
                             update_thread_local_hook=seen_local.append)
    config.update("jax_plax_faces_test_hooked", 2)
    with state(3):
        with state(4):
            pass
    assert seen_global == [1, 2] and seen_local == [3, 4, 3, None]
