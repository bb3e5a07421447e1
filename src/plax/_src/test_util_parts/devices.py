"""The device under test, what it supports, tests skipped by device or flag, and meshes.

"The device under test" is the platform of plax's default backend (``cpu``, ``gpu``,
``tpu``), or what ``--jax_test_dut`` says. Device tags add ``cuda`` or ``rocm`` on GPUs.
"""
from __future__ import annotations

import contextlib
import datetime
import functools
import math
import re
import unittest
from functools import cached_property

import ml_dtypes
import numpy as np

import plax
from plax.core.config import config
from plax.extend import backend as _backend
from plax.sharding import AxisType, Mesh, set_mesh
from plax._src.test_util_parts.flags import TEST_DUT


def _client():
    return _backend.get_backend()


def device_under_test() -> str:
    """``cpu``, ``gpu`` or ``tpu``: the default backend's platform (or ``--jax_test_dut``)."""
    return TEST_DUT.value or _client().platform


_NARROW_64 = {np.uint64, np.int64, np.float64, np.complex128}


def supported_dtypes() -> set:
    """The scalar types the device under test computes in (without 64-bit ones unless x64
    is on), as JAX's lists them per platform."""
    common = {np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32,
              ml_dtypes.bfloat16, np.float16, np.float32, np.complex64}
    platform = device_under_test()
    if platform == "tpu":
        types = common | {ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.float8_e4m3fn,
                          ml_dtypes.float8_e4m3b11fnuz, ml_dtypes.float8_e5m2}
    elif platform == "gpu":
        types = common | _NARROW_64 | {ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2}
    else:
        types = common | _NARROW_64 | {ml_dtypes.int4, ml_dtypes.uint4}
    if not config.read("enable_x64"):
        types -= _NARROW_64
    return types


def is_device_rocm() -> bool:
    """Whether the backend is a ROCm GPU."""
    return "rocm" in _client().platform_version


def is_device_cuda() -> bool:
    """Whether the backend is a CUDA GPU."""
    return "cuda" in _client().platform_version


def is_cloud_tpu() -> bool:
    """Whether this runs on a Cloud TPU VM (plax: whether the backend is a TPU)."""
    return device_under_test() == "tpu"


def is_cloud_tpu_at_least(year: int, month: int, day: int) -> bool:
    """True off Cloud TPU; on it, whether the TPU runtime was built on or after the date
    (read from the platform version's ``(seconds since the epoch)``; True if absent)."""
    if not is_cloud_tpu():
        return True
    stamps = re.findall(r"\(.*?\)", _client().platform_version.split("\n")[-1])
    if len(stamps) != 1:
        return True
    return datetime.date.fromtimestamp(int(stamps[0][1:-1])) >= datetime.date(year, month, day)


def pjrt_c_api_version_at_least(major_version: int, minor_version: int) -> bool:
    """True unless the backend is a PJRT C API plugin older than the version."""
    client = _client()
    major = getattr(client, "pjrt_c_api_major_version", None)
    minor = getattr(client, "pjrt_c_api_minor_version", None)
    if major is None or minor is None:
        return True
    return (major, minor) >= (major_version, minor_version)


def get_tpu_version() -> int:
    """The generation of the TPU under test (ValueError on other devices)."""
    if device_under_test() != "tpu":
        raise ValueError("Device is not TPU")
    kind = plax.devices()[0].device_kind
    found = re.match(r"TPU[^\d]*(\d+)", kind)
    if found is None:
        raise ValueError(f"Device kind {kind} is not supported")
    return int(found.group(1))


def is_device_tpu_at_least(version: int) -> bool:
    """Whether the device under test is a TPU of at least that generation."""
    return device_under_test() == "tpu" and get_tpu_version() >= version


# TPU variants whose device kind spells them otherwise.
_TPU_KIND_TESTS = {"v5e": lambda kind: "v5 lite" in kind,
                   "v6e": lambda kind: "v6 lite" in kind,
                   "v5p": lambda kind: kind.endswith("v5"),
                   "v7x": lambda kind: "TPU7x" in kind}


def is_device_tpu(version: int | None = None, variant: str = "") -> bool:
    """Whether the device under test is a TPU (of that version and variant, e.g. 5, "e")."""
    if device_under_test() != "tpu":
        return False
    if version is None:
        return True
    kind = plax.devices()[0].device_kind
    wanted = f"v{version}{variant}"
    test = _TPU_KIND_TESTS.get(wanted)
    return test(kind) if test is not None else wanted in kind


def _gpu_capability():
    gpus = plax.local_devices(backend="gpu")
    return tuple(int(x) for x in gpus[0].compute_capability.split("."))


def is_cuda_compute_capability_at_least(capability: str) -> bool:
    """Whether the CUDA GPU's compute capability is at least ``capability`` ("9.0")."""
    if not is_device_cuda():
        return False
    return _gpu_capability() >= tuple(int(x) for x in capability.split("."))


def is_cuda_compute_capability_equal(capability: str) -> bool:
    """Whether the CUDA GPU's compute capability is ``capability``."""
    if not is_device_cuda():
        return False
    return _gpu_capability() == tuple(int(x) for x in capability.split("."))


def _device_tags() -> set:
    platform = device_under_test()
    if is_device_rocm():
        return {platform, "rocm"}
    if is_device_cuda():
        return {platform, "cuda"}
    return {platform}


def test_device_matches(device_types) -> bool:
    """Whether one of ``device_types`` (a list of names: "cpu", "gpu", "cuda", ...) is a tag
    of the device under test."""
    assert not isinstance(device_types, str), "device_types should be a list of strings"
    tags = _device_tags()
    for device_type in device_types:
        assert isinstance(device_type, str), device_type
        if device_type in tags:
            return True
    return False


test_device_matches.__test__ = False  # (not a test, pytest)


def _device_filter(predicate, skip_reason=None):
    """A decorator skipping a test method (when it runs) unless ``predicate()``."""
    def decorate(test_method):
        @functools.wraps(test_method)
        def filtered(self, *args, **kwargs):
            tags = _device_tags()
            if not predicate():
                name = getattr(test_method, "__name__", "[unknown test]")
                raise unittest.SkipTest(
                    skip_reason or f"{name} not supported on device with tags {tags}.")
            return test_method(self, *args, **kwargs)
        return filtered
    return decorate


def skip_on_devices(*disabled_devices, skip_reason=None):
    """Skip the test method on devices with any of these tags."""
    if skip_reason is None:
        skip_reason = "Skipped on devices with tags: " + ", ".join(disabled_devices)
    return _device_filter(lambda: not test_device_matches(disabled_devices), skip_reason)


def run_on_devices(*enabled_devices, skip_reason=None):
    """Run the test method only on devices with one of these tags."""
    if skip_reason is None:
        skip_reason = ("Skipped unless running on devices with tags: "
                       + ", ".join(enabled_devices))
    return _device_filter(lambda: test_device_matches(enabled_devices), skip_reason)


_PLATFORMS_WITH_DONATION = ("cpu", "cuda", "rocm", "tpu", "neuron")


def device_supports_buffer_donation():
    """Run the test method only on devices that donate buffers."""
    return _device_filter(lambda: test_device_matches(_PLATFORMS_WITH_DONATION))


def request_cpu_devices(nr_devices: int) -> None:
    """Ask for at least ``nr_devices`` CPU devices (at a test module's top, before the
    backend starts; later it may have no effect)."""
    if config.read("num_cpu_devices") < nr_devices:
        try:
            config.update("jax_num_cpu_devices", nr_devices)
        except RuntimeError:
            pass


def skip_on_flag(flag_name, skip_value):
    """Skip the test method while config flag ``flag_name`` has ``skip_value``."""
    def decorate(test_method):
        @functools.wraps(test_method)
        def filtered(self, *args, **kwargs):
            value = config.read(flag_name)
            if value == skip_value:
                name = getattr(test_method, "__name__", "[unknown test]")
                raise unittest.SkipTest(
                    f"{name} not supported when FLAGS.{flag_name} is {value}")
            return test_method(self, *args, **kwargs)
        return filtered
    return decorate


# --- meshes ------------------------------------------------------------------------------

@contextlib.contextmanager
def with_mesh(named_shape):
    """Inside, the mesh of ``[(axis name, size), ...]`` over the first local devices is the
    current one (the test is skipped if there are too few)."""
    names = tuple(name for name, _ in named_shape)
    shape = tuple(size for _, size in named_shape)
    size = math.prod(shape)
    local = list(plax.local_devices())
    if len(local) < size:
        raise unittest.SkipTest(f"Test requires {size} local devices")
    with Mesh(np.array(local[:size]).reshape(shape), names):
        yield


def with_mesh_from_kwargs(f):
    """``f`` run inside ``with_mesh(kwargs["mesh"])``."""
    return lambda *args, **kwargs: with_mesh(kwargs["mesh"])(f)(*args, **kwargs)


def create_mesh(mesh_shape, axis_names, iota_order=False, axis_types=None):
    """A mesh of that shape (the test is skipped if there are too few devices): from
    ``make_mesh``, or over the devices in id order with ``iota_order``."""
    size = math.prod(mesh_shape)
    devices = plax.devices()
    if len(devices) < size:
        raise unittest.SkipTest(
            f"Test requires {size} global devices and found {len(devices)}.")
    if iota_order:
        ordered = sorted(devices, key=lambda d: d.id)
        return Mesh(np.array(ordered[:size]).reshape(mesh_shape), axis_names,
                    axis_types=axis_types)
    if axis_types is None:
        axis_types = (AxisType.Auto,) * len(mesh_shape)
    return plax.make_mesh(mesh_shape, axis_names, axis_types)


def with_explicit_mesh(sizes, names, axis_types=None, iota_order=False):
    """A decorator running the test inside ``set_mesh`` of a new mesh (Explicit axes by
    default), passed to it as ``mesh=``."""
    if axis_types is None:
        axis_types = (AxisType.Explicit,) * len(names)

    def decorator(fn):
        def mesh_fn(*args, **kwargs):
            mesh = create_mesh(sizes, names, iota_order, axis_types=axis_types)
            with set_mesh(mesh):
                return fn(*args, **kwargs, mesh=mesh)
        return mesh_fn
    return decorator


# --- dtype lists -------------------------------------------------------------------------

class _LazyDtypes:
    """The lists of dtypes tests draw from, filtered by what the device under test supports
    (computed on first use: the device may not be known at import)."""

    def supported(self, dtypes) -> list:
        """The ones of ``dtypes`` the device under test supports, in order."""
        supported = supported_dtypes()
        return [d for d in dtypes if d in supported]

    @cached_property
    def custom_floats(self) -> list:
        return self.supported([getattr(ml_dtypes, n) for n in (
            "bfloat16", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
            "float8_e5m2", "float8_e5m2fnuz", "float8_e3m4", "float8_e4m3",
            "float8_e8m0fnu", "float4_e2m1fn")])

    @cached_property
    def floating(self) -> list:
        return self.supported([np.float32, np.float64])

    @cached_property
    def all_floating(self) -> list:
        return self.supported([ml_dtypes.bfloat16, np.float16, np.float32, np.float64])

    @cached_property
    def integer(self) -> list:
        return self.supported([np.int32, np.int64])

    @cached_property
    def all_integer(self) -> list:
        return self.supported([np.int8, np.int16, np.int32, np.int64])

    @cached_property
    def unsigned(self) -> list:
        return self.supported([np.uint32, np.uint64])

    @cached_property
    def all_unsigned(self) -> list:
        return self.supported([np.uint8, np.uint16, np.uint32, np.uint64])

    @cached_property
    def complex(self) -> list:
        return self.supported([np.complex64, np.complex128])

    @cached_property
    def boolean(self) -> list:
        return self.supported([np.bool_])

    @cached_property
    def inexact(self) -> list:
        return self.floating + self.complex

    @cached_property
    def all_inexact(self) -> list:
        return self.all_floating + self.complex

    @cached_property
    def numeric(self) -> list:
        return self.floating + self.integer + self.unsigned + self.complex

    @cached_property
    def all(self) -> list:
        return (self.all_floating + self.all_integer + self.all_unsigned + self.complex
                + self.boolean)


dtypes = _LazyDtypes()
