"""A pytest plugin that runs JAX's TPU test files on a CPU as if on a TPU v5e (``run.py
--as-tpu``): a check that needs no chip, for kernels that must also compile for one.

The tests' device questions (``jtu.test_device_matches(["tpu"])``, ``is_device_tpu``, the TPU
generation, ``pltpu.get_tpu_info()``) answer as a v5e would, and every ``pallas_call`` that is not in interpret mode is
built into its Mosaic module first (plax's TPU lowering, verified and serialised by jaxlib's
Mosaic bindings: lowering errors surface as on a chip) and then runs in interpret mode. What a
chip alone shows (Mosaic's compile errors, numerics, the compiled HLO) it cannot show.
It changes plax in the process it is loaded in: use it only for such a pytest run.
"""
import plax  # noqa: F401
from plax._src import test_util as jtu
from plax._src.test_util_parts import devices
from plax.core.rules import register_lowering
from plax.higher_order import pallas_call as hp
from plax.pallas import mosaic_bindings, mosaic_call, tpu_info

devices.device_under_test = lambda: "tpu"
devices.get_tpu_version = lambda: 5
devices.is_device_tpu = lambda version=None, variant="": (version in (None, 5)
                                                          and variant in ("", "e"))
for _name in ("device_under_test", "get_tpu_version", "is_device_tpu"):
    setattr(jtu, _name, getattr(devices, _name))
jtu.is_cloud_tpu_at_least = lambda *args, **kwargs: True
_chip_of = tpu_info.chip_version_from_device_kind
tpu_info.chip_version_from_device_kind = (  # (pltpu.get_tpu_info: a v5e's)
    lambda kind: _chip_of("TPU v5 lite" if kind == "cpu" else kind))

_interpreted = hp._lowering


def _built_then_interpreted(ctx, *args, interpret, **params):
    if not interpret:
        options = mosaic_call._mosaic_params(params["compiler_params"])
        kernel = mosaic_call.sanitize_name(params.get("name") or "kernel")
        text = mosaic_call.kernel_module_text(params["jaxpr"], params["grid_mapping"], kernel,
                                              options.get("dimension_semantics"), facts={})
        mosaic_bindings.serialize_kernel(text, mosaic_call.MOSAIC_DIALECT_VERSION)
        interpret = True
    return _interpreted(ctx, *args, interpret=interpret, **params)


register_lowering(hp.pallas_call_p, _built_then_interpreted)
