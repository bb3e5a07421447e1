"""plax.scipy.spatial.transform: Rotation and Slerp against scipy.spatial.transform and JAX's
values, under jit (Rotation is a pytree), vmap and grad."""
import warnings

import numpy as np
import pytest
from scipy.spatial.transform import Rotation as OspRotation
from scipy.spatial.transform import Slerp as OspSlerp

import plax
from plax.scipy.spatial.transform import Rotation, Slerp
from plax.test_util import check_grads
from tests.helpers import grad_check_defaults

RNG = np.random.default_rng(0)
QUATS = RNG.normal(size=(6, 4))
QUATS[1] = [0, 0, 0, 1]         # identity
QUATS[2] = [0, 0, 1e-5, 1]      # a tiny angle: the series branches
QUATS[3] = [0, -1, 0, 0]        # pi about y: gimbal lock for some sequences
QUATS[4] = [0.3, 0, 0, -0.9]    # negative w
QUATS = QUATS.astype(np.float32)
VECTORS = RNG.normal(size=(6, 3)).astype(np.float32)
R = Rotation.from_quat(QUATS)
OSP = OspRotation.from_quat(QUATS.astype(np.float64))


def same_rotation(quat, want_quat, rtol=2e-5):
    """Quaternions q and -q are one rotation: compare up to that sign."""
    quat, want_quat = np.asarray(quat, np.float64), np.asarray(want_quat, np.float64)
    sign = np.sign(np.sum(quat * want_quat, axis=-1, keepdims=True))
    np.testing.assert_allclose(quat * sign, want_quat, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("name,kwargs", [
    ("as_matrix", {}), ("as_rotvec", {}), ("as_rotvec", {"degrees": True}), ("as_mrp", {}),
    ("magnitude", {}), ("as_quat", {"canonical": True}), ("as_quat", {"scalar_first": True}),
    ("apply", {"vectors": VECTORS}), ("apply", {"vectors": VECTORS, "inverse": True})])
def test_conversions_match_scipy(name, kwargs):
    out = getattr(R, name)(**kwargs)
    want = getattr(OSP, name)(**kwargs)
    assert out.dtype == np.float32
    if name == "as_rotvec":
        # a half turn (w = 0) has two rotation vectors; JAX keeps the quaternion's sign
        # (-pi about y here), SciPy flips it
        assert np.allclose(out[3], [0, -np.pi, 0] if not kwargs else [0, -180, 0])
        out, want = np.delete(np.asarray(out), 3, 0), np.delete(want, 3, 0)
    np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-5)


# extrinsic/intrinsic, symmetric (Euler proper) and Tait-Bryan sequences
@pytest.mark.parametrize("seq", ["xyz", "ZYX", "zxz", "XYX", "yzx", "ZXZ"])
def test_euler_angles_match_scipy(seq):
    out = R.as_euler(seq)
    # at gimbal lock (pi about y: QUATS[3]) SciPy warns and, like JAX, sets the third angle 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        want = OSP.as_euler(seq)
    # angles of pi may come out as -pi on either side
    np.testing.assert_allclose(np.cos(out), np.cos(want), atol=1e-4)
    np.testing.assert_allclose(np.sin(out), np.sin(want), atol=1e-4)
    angles = np.array([[0.3, -1.2, 2.0], [np.pi / 2, 0.1, 0.2]], np.float32)
    same_rotation(Rotation.from_euler(seq, angles).quat, OspRotation.from_euler(
        seq, angles.astype(np.float64)).as_quat())
    np.testing.assert_allclose(R.as_euler(seq, degrees=True), np.rad2deg(out), rtol=1e-5)


def test_constructors_match_scipy():
    same_rotation(Rotation.from_matrix(OSP.as_matrix()).quat, OSP.as_quat())
    same_rotation(Rotation.from_matrix(np.diag([1.0, -1.0, -1.0])).quat, [1, 0, 0, 0])
    rotvecs = RNG.normal(size=(5, 3)) * np.array([[1], [1e-4], [3], [0], [10]])
    same_rotation(Rotation.from_rotvec(rotvecs).quat, OspRotation.from_rotvec(rotvecs).as_quat())
    same_rotation(Rotation.from_rotvec(rotvecs, degrees=True).quat,
                  OspRotation.from_rotvec(rotvecs, degrees=True).as_quat())
    mrps = RNG.normal(size=(4, 3))
    same_rotation(Rotation.from_mrp(mrps).quat, OspRotation.from_mrp(mrps).as_quat())
    # JAX's docstring example: 90 degrees about z
    r = Rotation.from_euler("z", 90, degrees=True)
    np.testing.assert_allclose(r.as_rotvec(), [0, 0, np.pi / 2], rtol=1e-6, atol=1e-7)
    assert r.single and not R.single and len(R) == 6
    np.testing.assert_array_equal(Rotation.identity().quat, [0, 0, 0, 1])
    np.testing.assert_array_equal(Rotation.identity(3).quat, np.tile([0, 0, 0, 1.0], (3, 1)))


def test_composition_inverse_indexing_and_concatenate():
    composed = R * R[::-1]
    same_rotation(composed.quat, (OSP * OSP[::-1]).as_quat())
    np.testing.assert_allclose((R * R.inv()).as_matrix(), np.broadcast_to(np.eye(3), (6, 3, 3)),
                               atol=1e-5)
    # JAX's docstring example: z by 90 after x by 90
    r3 = Rotation.from_euler("z", 90, degrees=True) * Rotation.from_euler("x", 90, degrees=True)
    np.testing.assert_allclose(r3.as_matrix(), [[0, 0, 1], [1, 0, 0], [0, 1, 0]], atol=1e-6)
    np.testing.assert_allclose(R[2:4].quat, R.quat[2:4])
    both = Rotation.concatenate([R[:2], R[4], R[5:]])
    np.testing.assert_allclose(both.quat, QUATS[[0, 1, 4, 5]] / np.linalg.norm(
        QUATS[[0, 1, 4, 5]], axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(R[0].apply(VECTORS), OSP[0].apply(VECTORS), rtol=2e-5, atol=2e-5)


def test_mean_matches_scipy():
    for weights in (None, np.arange(6.0)):
        out = R.mean(weights).as_matrix()
        np.testing.assert_allclose(out, OSP.mean(weights).as_matrix(), rtol=1e-4, atol=1e-4)


def test_random_rotations_are_unit_and_reproducible():
    key = plax.random.key(0)
    r = Rotation.random(key, 500)
    assert r.quat.shape == (500, 4)
    np.testing.assert_allclose(np.linalg.norm(r.quat, axis=1), 1, rtol=1e-5)
    np.testing.assert_array_equal(Rotation.random(key, 500).quat, r.quat)
    # uniform rotations: the mean rotation matrix is near zero
    np.testing.assert_allclose(np.mean(r.as_matrix(), axis=0), 0, atol=0.15)
    assert Rotation.random(key).single


def test_slerp_matches_scipy_and_jax():
    times = np.array([0.0, 1.0, 3.0])
    keys = np.array([[90, 0, 0], [0, 45, 0], [0, 0, -30]])
    slerp = Slerp.init(times, Rotation.from_euler("zxy", keys, degrees=True))
    osp = OspSlerp(times, OspRotation.from_euler("zxy", keys, degrees=True))
    samples = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0])
    same_rotation(slerp(samples).quat, osp(samples).as_quat())
    one = slerp(2.2)
    assert one.single
    same_rotation(one.quat, osp(2.2).as_quat())


def test_jit_vmap_and_grad():
    jitted = plax.jit(lambda r, v: r.apply(v))(R, VECTORS)  # a Rotation crosses jit
    np.testing.assert_allclose(jitted, OSP.apply(VECTORS), rtol=2e-5, atol=2e-5)
    out = plax.vmap(lambda q: Rotation.from_quat(q).as_euler("xyz"))(QUATS[np.array([0, 4, 5])])
    np.testing.assert_allclose(out, R[np.array([0, 4, 5])].as_euler("xyz"), rtol=1e-5, atol=1e-6)
    smooth = np.array([0.3, -0.2, 0.9], np.float32)
    check_grads(lambda rv: Rotation.from_rotvec(rv).apply(VECTORS), (smooth,), order=1,
                **grad_check_defaults(np.float32))
    check_grads(lambda q: Rotation.from_quat(q).as_euler("ZYX"), (QUATS[5],), order=1,
                **grad_check_defaults(np.float32))
    check_grads(lambda m: Rotation.from_matrix(m).as_rotvec(), (OSP[0].as_matrix(),), order=1,
                **grad_check_defaults(np.float32))


def test_errors_name_the_argument_and_the_fix():
    with pytest.raises(ValueError, match="Expected 3 axes, got 'xy'"):
        R.as_euler("xy")
    with pytest.raises(ValueError, match="Expected axes from `seq` to be from"):
        Rotation.from_euler("xYz", np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="Expected consecutive axes to be different"):
        Rotation.from_euler("xxz", np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="non-empty string of upto 3 characters"):
        Rotation.from_euler("xyzx", np.ones(4))
    with pytest.raises(ValueError, match=r"last dimension of len\(seq\) = 2"):
        Rotation.from_euler("xy", np.array([1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match="Single rotation is not subscriptable"):
        R[0][0]
    with pytest.raises(TypeError, match=r"Single rotation has no len\(\)"):
        len(R[0])
    with pytest.raises(ValueError, match=r"from_quat: quat must have shape \(\.\.\., 4\)"):
        Rotation.from_quat(np.ones(3))
    with pytest.raises(ValueError, match="Expected `weights` to have number of values equal"):
        R.mean(np.ones(2))
    with pytest.raises(TypeError, match="`rotations` must be a `Rotation` instance"):
        Slerp.init([0, 1], QUATS[:2])
    with pytest.raises(ValueError, match="`rotations` must be a sequence of at least 2"):
        Slerp.init([0], R[:1])
    with pytest.raises(ValueError, match="Expected number of rotations to be equal to number"):
        Slerp.init([0, 1, 2], R[:2])
    with pytest.raises(ValueError, match="times must be in strictly increasing order"):
        Slerp.init([1.0, 0.0], R[:2])
    with pytest.raises(ValueError, match="`times` must be at most 1-dimensional"):
        Slerp.init([0, 1], R[:2])(np.ones((2, 2)))
