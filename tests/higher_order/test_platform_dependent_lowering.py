"""lax.platform_dependent lowers only the branch of the platform being compiled for: a
branch that cannot lower here (a CUDA-only custom call) is never lowered on CPU."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.extend.core import Primitive
from plax.first_order.ad_util import defjvp
from plax.core.rules import abstract_eval_rules, batch_rules, register_lowering
from plax.lowering.stablehlo import lower_jaxpr_to_module

cuda_only_p = Primitive("cuda_only_kernel")
abstract_eval_rules[cuda_only_p] = lambda x: x
register_lowering(cuda_only_p, lambda ctx, x: [ctx.op1(
    "stablehlo.custom_call", [x], attrs='call_target_name = "my_cuda_kernel"')], platform="cuda")
defjvp(cuda_only_p, lambda t, ans, x: t)
batch_rules[cuda_only_p] = lambda axis, vals, dims: (cuda_only_p.bind(*vals), dims[0])


def by_platform(x):
    return lax.platform_dependent(x, cpu=jnp.sin, cuda=cuda_only_p.bind)


X = np.array([0.3, -1.2, 2.0], np.float32)


@pytest.mark.parametrize("name,run,want", [
    ("jit", plax.jit(by_platform), np.sin),
    ("jit of vmap", plax.jit(plax.vmap(by_platform)), np.sin),
    ("jit of vmap of grad", plax.jit(plax.vmap(plax.grad(by_platform))), np.cos),
    ("grad of jit", plax.vmap(plax.grad(plax.jit(by_platform))), np.cos),
])
def test_the_cuda_branch_is_never_lowered_on_cpu(name, run, want):
    if plax.default_backend() != "cpu":
        pytest.skip("checks the CPU lowering")
    np.testing.assert_allclose(np.asarray(run(X)), want(X), rtol=1e-6)


def test_each_platform_lowers_its_branch_only():
    jaxpr = plax.make_jaxpr(by_platform)(1.)
    assert "branches_platforms=(('cpu',), ('cuda',))" in str(jaxpr)
    cpu_text = plax.jit(by_platform).lower(1.).as_text()
    assert "stablehlo.sine" in cpu_text and "my_cuda_kernel" not in cpu_text
    cuda_text = lower_jaxpr_to_module(jaxpr.jaxpr, platform="cuda")
    assert "my_cuda_kernel" in cuda_text and "stablehlo.sine" not in cuda_text
    # a branch for another platform is still refused when there is none for this one
    with pytest.raises(NotImplementedError, match="no branch for the platform 'cpu'"):
        plax.jit(lambda x: lax.platform_dependent(x, cuda=cuda_only_p.bind))(1.)
