"""The harness machinery of ``jax._src.internal_test_util.test_harnesses``.

A harness is one use case of a primitive: a callable and descriptions of its arguments
(random arrays of a shape and dtype, values made from a random generator, static values
or constants). Tests draw their cases from the catalogue ``all_harnesses`` that
``define`` fills (the catalogue itself is in ``test_harnesses`` and the files it imports);
``parameterized`` turns a list of harnesses into named test cases, one per harness.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, Union

import numpy as np
from absl.testing import parameterized as absl_parameterized

from plax._src import test_util as jtu

Rng = Any
DType = Any


class RandArg(NamedTuple):
    """An argument drawn by the harness's generator, of this shape and dtype."""
    shape: tuple[int, ...]
    dtype: DType


class StaticArg(NamedTuple):
    """An argument passed as it is and kept out of the harness's dynamic arguments."""
    value: Any


class CustomArg(NamedTuple):
    """An argument made by ``make(rng)``."""
    make: Callable[[Rng], Any]


ArgDescriptor = Union[RandArg, StaticArg, CustomArg, Any]


class Limitation:
    """Where a harness does not run on JAX: its devices and dtypes (empty: all of them)."""

    def __init__(self, description: str, *, enabled: bool = True,
                 devices: str | Sequence[str] = ("cpu", "gpu", "tpu"),
                 dtypes: Sequence[DType] = (), skip_run: bool = False):
        if not isinstance(description, str):
            raise TypeError(f"Limitation: description must be a str, got {description!r}")
        self.description = description
        self.enabled = enabled
        self.devices = (devices,) if isinstance(devices, str) else tuple(devices)
        self.dtypes = tuple(dtypes)
        self.skip_run = skip_run

    def __str__(self):
        names = [np.dtype(d).name for d in self.dtypes]
        return (f'"{self.description}" devices={self.devices} dtypes={names}'
                + (" (skip_run) " if self.skip_run else ""))

    __repr__ = __str__

    def filter(self, device: str | None = None, dtype: DType | None = None) -> bool:
        """Whether the limitation applies on ``device`` to ``dtype`` (None: any)."""
        return (self.enabled
                and (not self.dtypes or dtype is None or dtype in self.dtypes)
                and (device is None or device in self.devices))


class Harness:
    """One use case: ``fun`` over arguments described by ``arg_descriptors``.

    ``group_name`` is most often the primitive's name; ``fullname`` (group and name, made
    safe for ``-k``) names the test case. Extra keyword parameters stay in ``params``.
    """

    def __init__(self, group_name, name, fun, arg_descriptors, *, dtype,
                 rng_factory=jtu.rand_default, jax_unimplemented: Sequence[Limitation] = (),
                 **params):
        self.group_name = jtu.sanitize_test_name(group_name)
        self.name = jtu.sanitize_test_name(name)
        self.fullname = (self.name if self.group_name is None
                         else f"{self.group_name}_{self.name}")
        self.fun = fun
        self.arg_descriptors = arg_descriptors
        self.rng_factory = rng_factory
        self.jax_unimplemented = jax_unimplemented
        self.dtype = dtype
        self.params = params

    def __str__(self):
        return self.fullname

    def _make_arg(self, descriptor, rng):
        if isinstance(descriptor, StaticArg):
            return descriptor.value
        if isinstance(descriptor, RandArg):
            return self.rng_factory(rng)(descriptor.shape, descriptor.dtype)
        if isinstance(descriptor, CustomArg):
            return descriptor.make(rng)
        return descriptor

    def args_maker(self, rng: Rng) -> list:
        """Every argument, static ones included."""
        return [self._make_arg(d, rng) for d in self.arg_descriptors]

    def dyn_args_maker(self, rng: Rng) -> list:
        """The dynamic arguments only, for ``dyn_fun``."""
        return [self._make_arg(d, rng) for d in self.arg_descriptors
                if not isinstance(d, StaticArg)]

    def dyn_fun(self, *dyn_args):
        """``fun`` called with the dynamic arguments, the static ones filled in."""
        return self.fun(*self._args_from_dynargs(dyn_args))

    def _args_from_dynargs(self, dyn_args: Sequence) -> list:
        dynamic = iter(dyn_args)
        return [d.value if isinstance(d, StaticArg) else next(dynamic)
                for d in self.arg_descriptors]

    def filter(self, device_under_test: str, *, include_jax_unimpl: bool = False,
               one_containing: str | None = None) -> bool:
        """Whether the harness runs on ``device_under_test`` (and names ``one_containing``)."""
        if not include_jax_unimpl and any(
                device_under_test in lim.devices for lim in self.jax_unimplemented
                if lim.filter(device=device_under_test, dtype=self.dtype)):
            return False
        return one_containing is None or one_containing in self.fullname


_DTYPE_FAMILIES = (  # (members, the name that replaces them when all are present)
    ({"int8", "int16", "int32", "int64"}, "signed"),
    ({"uint8", "uint16", "uint32", "uint64"}, "unsigned"),
    ({"signed", "unsigned"}, "integer"),
    ({"bfloat16", "float16", "float32", "float64"}, "floating"),
    ({"complex64", "complex128"}, "complex"),
    ({"floating", "complex"}, "inexact"),
    ({"integer", "inexact", "bool"}, "all"),
)


def dtypes_to_str(dtype_list: Sequence[DType], empty_means_all=False) -> str:
    """A short description of a set of dtypes ("signed, float32", "inexact", "all")."""
    if not dtype_list and empty_means_all:
        return "all"
    names = {np.dtype(d).name for d in dtype_list}
    for members, family in _DTYPE_FAMILIES:
        if members <= names:
            names = (names - members) | {family}
    return ", ".join(sorted(names))


all_harnesses: list[Harness] = []


def define(group_name, name, fun, arg_descriptors, *, dtype, rng_factory=jtu.rand_default,
           jax_unimplemented: Sequence[Limitation] = (), **params):
    """Adds a harness to ``all_harnesses``."""
    all_harnesses.append(Harness(str(group_name), name, fun, arg_descriptors, dtype=dtype,
                                 rng_factory=rng_factory,
                                 jax_unimplemented=jax_unimplemented, **params))


def parameterized(harnesses: Iterable[Harness], *, one_containing: str | None = None,
                  include_jax_unimpl: bool = False):
    """A test decorator: one case per harness that runs on this device, named by it.

    ``one_containing`` (or the ``JAX_TEST_HARNESS_ONE_CONTAINING`` variable) keeps only the
    first harness whose name contains it, as one case with no name suffix (for debugging).
    """
    one_containing = one_containing or os.environ.get("JAX_TEST_HARNESS_ONE_CONTAINING")
    device = jtu.device_under_test()
    cases = [dict(testcase_name=h.fullname if one_containing is None else "", harness=h)
             for h in harnesses
             if h.filter(device, one_containing=one_containing,
                         include_jax_unimpl=include_jax_unimpl)]
    if one_containing is not None:
        if not cases:
            raise ValueError(f"parameterized: no harness's name contains {one_containing!r}")
        cases = cases[:1]
    if not cases:
        return jtu.skip_on_devices(device)
    return absl_parameterized.named_parameters(*cases)
