"""plax.scipy.spatial.transform: 3-D rotations as unit quaternions, and their interpolation.

``Rotation`` holds ``quat``, one quaternion ``(x, y, z, w)`` (scalar last, as SciPy) or a stack
``(N, 4)``; it is a NamedTuple, so a pytree that crosses jit, vmap and grad. Conversions
follow SciPy's formulas (series near the angle 0 where a quotient would lose its digits;
Euler angles by Bernardes and Viollet's method, as SciPy), written on plax.numpy; each
conversion is one jitted computation.
"""
from __future__ import annotations

import re
import typing
from functools import partial

import numpy as np

from plax import numpy as jnp
from plax.api.jit import jit
from plax.core.trace import Tracer
from plax.numpy.util import promote_dtypes_inexact

__all__ = ["Rotation", "Slerp"]

_EULER_EPS = 1e-7  # an angle this close to 0 or pi is gimbal lock


def _norm(v):
    return jnp.sqrt(jnp.sum(v * v, axis=-1))


@jit
def _normalized(quat):
    return quat / _norm(quat)[..., None]


@jit
def _compose(p, q):
    """The Hamilton product ``p q`` (apply ``q``, then ``p``), broadcasting over leading axes."""
    pv, pw, qv, qw = p[..., :3], p[..., 3:], q[..., :3], q[..., 3:]
    vector = pw * qv + qw * pv + jnp.cross(pv, qv)
    scalar = pw * qw - jnp.sum(pv * qv, axis=-1, keepdims=True)
    return jnp.concatenate([vector, scalar], axis=-1)


@jit
def _matrix(quat):
    x, y, z, w = (quat[..., i] for i in range(4))
    xx, yy, zz, ww = x * x, y * y, z * z, w * w
    rows = [[xx - yy - zz + ww, 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), -xx + yy - zz + ww, 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), -xx - yy + zz + ww]]
    return jnp.stack([jnp.stack(row, axis=-1) for row in rows], axis=-2)


@jit
def _quat_from_matrix(m):
    """From the largest of the diagonal and the trace (the best-conditioned of four formulas)."""
    d = [m[..., i, i] for i in range(3)]
    trace = d[0] + d[1] + d[2]
    candidates = []
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        q = [None] * 4
        q[i] = 1 - trace + 2 * d[i]
        q[j] = m[..., j, i] + m[..., i, j]
        q[k] = m[..., k, i] + m[..., i, k]
        q[3] = m[..., k, j] - m[..., j, k]
        candidates.append(jnp.stack(q, axis=-1))
    candidates.append(jnp.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                                 m[..., 1, 0] - m[..., 0, 1], 1 + trace], axis=-1))
    choice = jnp.argmax(jnp.stack(d + [trace], axis=-1), axis=-1)
    quat = jnp.take_along_axis(jnp.stack(candidates, axis=-2), choice[..., None, None],
                               axis=-2)[..., 0, :]
    return _normalized(quat)


@jit
def _quat_from_rotvec(rotvec):
    angle = _norm(rotvec)[..., None]
    small = angle <= 1e-3
    a2 = angle * angle
    safe = jnp.where(small, 1.0, angle)
    # sin(angle / 2) / angle, by its Taylor series near 0
    scale = jnp.where(small, 0.5 - a2 / 48 + a2 * a2 / 3840, jnp.sin(safe / 2) / safe)
    return jnp.concatenate([scale * rotvec, jnp.cos(angle / 2)], axis=-1)


@jit
def _rotvec(quat):
    quat = jnp.where(quat[..., 3:] < 0, -quat, quat)  # w >= 0: the angle lies in [0, pi]
    angle = 2 * jnp.arctan2(_norm(quat[..., :3]), quat[..., 3])[..., None]
    small = angle <= 1e-3
    a2 = angle * angle
    safe = jnp.where(small, 1.0, angle)
    # angle / sin(angle / 2), by its Taylor series near 0
    scale = jnp.where(small, 2 + a2 / 12 + 7 * a2 * a2 / 2880, safe / jnp.sin(safe / 2))
    return scale * quat[..., :3]


def _parse_euler_seq(seq, counts):
    if not isinstance(seq, str) or len(seq) not in counts:
        raise ValueError(f"Expected axis specification to be a non-empty string of upto 3 "
                         f"characters, got {seq!r}.")
    intrinsic = re.fullmatch(r"[XYZ]{1,3}", seq) is not None
    extrinsic = re.fullmatch(r"[xyz]{1,3}", seq) is not None
    if not (intrinsic or extrinsic):
        raise ValueError(f"Expected axes from `seq` to be from ['x', 'y', 'z'] or "
                         f"['X', 'Y', 'Z'], got {seq!r} (lower case: extrinsic, upper "
                         "case: intrinsic; no mixing).")
    if any(a == b for a, b in zip(seq, seq[1:])):
        raise ValueError(f"Expected consecutive axes to be different, got {seq!r}.")
    return ["xyz".index(c) for c in seq.lower()], extrinsic


@partial(jit, static_argnums=(1, 2))
def _euler(quat, axes, extrinsic):
    """Euler angles of ``quat`` about ``axes`` (Bernardes & Viollet 2022, as SciPy)."""
    if not extrinsic:
        axes = axes[::-1]
    i, j, k = axes
    symmetric = i == k
    if symmetric:
        k = 3 - i - j
    sign = (i - j) * (j - k) * (k - i) // 2
    w, qi, qj, qk = quat[..., 3], quat[..., i], quat[..., j], quat[..., k] * sign
    if symmetric:
        a, b, c, d = w, qi, qj, qk
    else:
        a, b, c, d = w - qj, qi + qk, qj + w, qk - qi
    middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
    half_sum, half_diff = jnp.arctan2(b, a), jnp.arctan2(d, c)
    at_zero = jnp.abs(middle) <= _EULER_EPS
    locked = at_zero | (jnp.abs(middle - np.pi) <= _EULER_EPS)
    # gimbal lock: the first angle takes the whole rotation about the shared axis, the third 0
    lock_angle = jnp.where(at_zero, 2 * half_sum, 2 * half_diff * (-1 if extrinsic else 1))
    first = jnp.where(locked, lock_angle if extrinsic else 0.0, half_sum - half_diff)
    third = jnp.where(locked, 0.0 if extrinsic else lock_angle, half_sum + half_diff)
    angles = [first, middle, third] if extrinsic else [third, middle, first]
    if not symmetric:
        third_index = 2 if extrinsic else 0
        angles[third_index] = angles[third_index] * sign
        angles[1] = angles[1] - np.pi / 2
    angles = jnp.stack(angles, axis=-1)
    return (angles + np.pi) % (2 * np.pi) - np.pi


def _elementary(axis, angle):
    parts = [jnp.zeros_like(angle)] * 3
    parts[axis] = jnp.sin(angle / 2)
    return jnp.stack(parts + [jnp.cos(angle / 2)], axis=-1)


class Rotation(typing.NamedTuple):
    """Rotation(s) in three dimensions, held as unit quaternions ``quat`` (``(4,)`` for one,
    ``(N, 4)`` for several; scalar last). ``r1 * r2`` applies ``r2`` first."""

    quat: typing.Any

    @classmethod
    def concatenate(cls, rotations: typing.Sequence):
        """One Rotation stacking ``rotations`` (single ones count as one each)."""
        return cls(jnp.concatenate([jnp.atleast_2d(r.quat) for r in rotations]))

    @classmethod
    def from_euler(cls, seq: str, angles, degrees: bool = False):
        """From Euler angles about the axes ``seq`` (``"xyz"``: extrinsic, ``"XYZ"``:
        intrinsic); ``angles[..., n]`` is the angle about ``seq[n]``."""
        axes, extrinsic = _parse_euler_seq(seq, (1, 2, 3))
        angles, = promote_dtypes_inexact(jnp.atleast_1d(angles))
        if angles.shape[-1] != len(axes):
            raise ValueError(f"from_euler: angles must have a last dimension of len(seq) = "
                             f"{len(axes)} (one angle per axis), got shape {angles.shape}.")
        if degrees:
            angles = jnp.deg2rad(angles)
        quat = _elementary(axes[0], angles[..., 0])
        for n in range(1, len(axes)):
            step = _elementary(axes[n], angles[..., n])
            quat = _compose(step, quat) if extrinsic else _compose(quat, step)
        return cls(quat)

    @classmethod
    def from_matrix(cls, matrix):
        """From rotation matrices ``(..., 3, 3)`` (the nearest rotation's quaternion)."""
        matrix, = promote_dtypes_inexact(jnp.asarray(matrix))
        _check_last(matrix, (3, 3), "from_matrix", "matrix")
        return cls(_quat_from_matrix(matrix))

    @classmethod
    def from_mrp(cls, mrp):
        """From Modified Rodrigues Parameters ``(..., 3)``."""
        mrp, = promote_dtypes_inexact(jnp.asarray(mrp))
        _check_last(mrp, (3,), "from_mrp", "mrp")
        squared_plus_1 = jnp.sum(mrp * mrp, axis=-1, keepdims=True) + 1
        return cls(jnp.concatenate([2 * mrp, 2 - squared_plus_1], axis=-1) / squared_plus_1)

    @classmethod
    def from_quat(cls, quat):
        """From quaternions ``(..., 4)`` (scalar last), normalised."""
        quat, = promote_dtypes_inexact(jnp.asarray(quat))
        _check_last(quat, (4,), "from_quat", "quat")
        return cls(_normalized(quat))

    @classmethod
    def from_rotvec(cls, rotvec, degrees: bool = False):
        """From rotation vectors ``(..., 3)``: the axis scaled by the angle."""
        rotvec, = promote_dtypes_inexact(jnp.asarray(rotvec))
        _check_last(rotvec, (3,), "from_rotvec", "rotvec")
        if degrees:
            rotvec = jnp.deg2rad(rotvec)
        return cls(_quat_from_rotvec(rotvec))

    @classmethod
    def identity(cls, num: int | None = None, dtype=float):
        """The identity rotation, or ``num`` of them."""
        quat = jnp.array([0.0, 0.0, 0.0, 1.0], dtype=dtype)
        return cls(quat if num is None else jnp.tile(quat, (num, 1)))

    @classmethod
    def random(cls, random_key, num: int | None = None):
        """Rotations drawn uniformly (normalised 4-D Gaussian quaternions) from
        ``random_key``: one, or ``num`` of them."""
        from plax import random
        shape = (4,) if num is None else (num, 4)
        return cls(_normalized(random.normal(random_key, shape)))

    def __getitem__(self, indexer):
        """The rotation(s) at ``indexer`` of a stack."""
        if self.single:
            raise TypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[indexer])

    def __len__(self):
        """How many rotations the stack holds."""
        if self.single:
            raise TypeError("Single rotation has no len().")
        return self.quat.shape[0]

    def __mul__(self, other) -> "Rotation":
        """The composition: ``other`` applied first, then ``self``."""
        if not isinstance(other, Rotation):
            return NotImplemented
        return Rotation.from_quat(_compose(self.quat, other.quat))

    def apply(self, vectors, inverse: bool = False):
        """The rotation(s) applied to ``vectors`` ``(..., 3)`` (broadcasting), or their
        inverses when ``inverse``."""
        vectors, = promote_dtypes_inexact(jnp.asarray(vectors))
        _check_last(vectors, (3,), "apply", "vectors")
        matrix = self.as_matrix()
        matrix = jnp.where(inverse, jnp.swapaxes(matrix, -1, -2), matrix)
        return jnp.sum(matrix * vectors[..., None, :], axis=-1)

    def as_euler(self, seq: str, degrees: bool = False):
        """Euler angles about the three axes ``seq`` (``"xyz"`` extrinsic, ``"XYZ"``
        intrinsic), each in [-pi, pi); at gimbal lock the third angle is 0."""
        if not isinstance(seq, str) or len(seq) != 3:
            raise ValueError(f"Expected 3 axes, got {seq!r}.")
        axes, extrinsic = _parse_euler_seq(seq, (3,))
        angles = _euler(self.quat, tuple(axes), extrinsic)
        return jnp.rad2deg(angles) if degrees else angles

    def as_matrix(self):
        """Rotation matrices ``(..., 3, 3)``."""
        return _matrix(self.quat)

    def as_mrp(self):
        """Modified Rodrigues Parameters ``(..., 3)`` (of the rotation by at most pi)."""
        sign = jnp.where(self.quat[..., 3:] < 0, -1.0, 1.0)
        return sign * self.quat[..., :3] / (1 + sign * self.quat[..., 3:])

    def as_rotvec(self, degrees: bool = False):
        """Rotation vectors ``(..., 3)``: the axis times the angle in [0, pi]."""
        rotvec = _rotvec(self.quat)
        return jnp.rad2deg(rotvec) if degrees else rotvec

    def as_quat(self, canonical: bool = False, scalar_first: bool = False):
        """The quaternions ``(..., 4)``; ``canonical`` picks the sign with w > 0 (the first
        non-zero of w, x, y, z positive); ``scalar_first`` orders them (w, x, y, z)."""
        quat = _canonical(self.quat) if canonical else self.quat
        return jnp.roll(quat, 1, axis=-1) if scalar_first else quat

    def inv(self):
        """The inverse rotation(s)."""
        return Rotation(self.quat * jnp.array([-1, -1, -1, 1], self.quat.dtype))

    def magnitude(self):
        """The angle of each rotation, in [0, pi]."""
        return 2 * jnp.arctan2(_norm(self.quat[..., :3]), jnp.abs(self.quat[..., 3]))

    def mean(self, weights=None):
        """The (weighted) mean rotation of a stack: the dominant eigenvector of
        ``sum_i w_i q_i q_i^T`` (Markley et al., as SciPy)."""
        n = len(self)
        w = jnp.ones(n, self.quat.dtype) if weights is None else jnp.asarray(weights,
                                                                              self.quat.dtype)
        if w.ndim != 1:
            raise ValueError(f"Expected `weights` to be 1 dimensional, got shape {w.shape}.")
        if w.shape[0] != n:
            raise ValueError(f"Expected `weights` to have number of values equal to number of "
                             f"rotations, got {w.shape[0]} values and {n} rotations.")
        k = jnp.dot(w * self.quat.T, self.quat)
        _, vectors = jnp.linalg.eigh(k)
        return Rotation(vectors[:, -1])

    @property
    def single(self) -> bool:
        """Whether this holds one rotation (``quat`` of shape ``(4,)``)."""
        return self.quat.ndim == 1


def _check_last(x, core, fn, name):
    if x.shape[x.ndim - len(core):] != core or x.ndim < len(core):
        raise ValueError(f"Rotation.{fn}: {name} must have shape (..., "
                         f"{', '.join(map(str, core))}), got {x.shape}.")


@jit
def _canonical(quat):
    """``quat`` or ``-quat``, whichever has its first non-zero of (w, x, y, z) positive."""
    negative = quat < 0
    zero = quat == 0
    flip = negative[..., 3]
    leading_zero = zero[..., 3]
    for i in range(3):
        flip = flip | (leading_zero & negative[..., i])
        leading_zero = leading_zero & zero[..., i]
    return jnp.where(flip[..., None], -quat, quat)


class Slerp(typing.NamedTuple):
    """Spherical linear interpolation between key rotations at increasing key times; build it
    with ``Slerp.init(times, rotations)`` and call it with the times to sample."""

    times: typing.Any
    timedelta: typing.Any
    rotations: Rotation
    rotvecs: typing.Any

    @classmethod
    def init(cls, times, rotations: Rotation):
        """The interpolator through ``rotations`` (at least 2) at ``times`` (one each)."""
        if not isinstance(rotations, Rotation):
            raise TypeError("`rotations` must be a `Rotation` instance.")
        if rotations.single or len(rotations) == 1:
            raise ValueError("`rotations` must be a sequence of at least 2 rotations.")
        times = jnp.asarray(times, dtype=rotations.quat.dtype)
        if times.ndim != 1:
            raise ValueError(f"Expected times to be specified in a 1 dimensional array, got "
                             f"{times.ndim} dimensions.")
        if times.shape[0] != len(rotations):
            raise ValueError(f"Expected number of rotations to be equal to number of "
                             f"timestamps given, got {len(rotations)} rotations and "
                             f"{times.shape[0]} timestamps.")
        known = times if not isinstance(times, Tracer) else times.to_concrete_value()
        if known is not None and not np.all(np.diff(np.asarray(known)) > 0):
            raise ValueError(f"Slerp.init: times must be in strictly increasing order, got "
                             f"{np.asarray(known)}.")
        starts = Rotation(rotations.quat[:-1])
        steps = starts.inv() * Rotation(rotations.quat[1:])
        return cls(times=times, timedelta=jnp.diff(times), rotations=starts,
                   rotvecs=steps.as_rotvec())

    def __call__(self, times):
        """The interpolated rotation(s) at ``times`` (a scalar or 1-D)."""
        t = jnp.asarray(times, dtype=self.times.dtype)
        if t.ndim > 1:
            raise ValueError(f"`times` must be at most 1-dimensional, got shape {t.shape}.")
        single = t.ndim == 0
        t = jnp.atleast_1d(t)
        result = _slerp(self, t)
        return result[0] if single else result


@jit
def _slerp(slerp, t):
    """The rotations at times ``t`` (1-D): each segment's start turned by the fraction of its
    step's rotation vector that ``t`` has covered (extrapolating beyond the ends)."""
    segment = jnp.maximum(jnp.searchsorted(slerp.times, t) - 1, 0)
    alpha = (t - slerp.times[segment]) / slerp.timedelta[segment]
    return slerp.rotations[segment] * Rotation.from_rotvec(slerp.rotvecs[segment] * alpha[:, None])
