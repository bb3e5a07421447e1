"""ott-jax's README, completed: entropic optimal transport between two point clouds with
Sinkhorn (jitted), its coupling's marginals, the gradient of the cost with respect to the
points, the kernel-mode solver, and the README's plot."""
import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

from ott.geometry import pointcloud
from ott.problems.linear import linear_problem
from ott.solvers import linear
from ott.solvers.linear import sinkhorn
from ott.tools import plot

matplotlib.use("Agg")
rngs = jax.random.split(jax.random.key(42), 4)
n, m, d = 6, 11, 2
x = jax.random.uniform(rngs[0], (n, d))
y = jax.random.uniform(rngs[1], (m, d))
a = jax.random.uniform(rngs[2], (n,)) + .2
b = jax.random.uniform(rngs[3], (m,)) + .2
a, b = a / jnp.sum(a), b / jnp.sum(b)
geom = pointcloud.PointCloud(x, y)
out = jax.jit(linear.solve)(geom, a, b)
plot.Plot()(out)
print(round(float(out.reg_ot_cost), 5), bool(out.converged),
      np.round(np.asarray(out.matrix).sum(1) - np.asarray(a), 5).tolist())


def cost(x):
    return linear.solve(pointcloud.PointCloud(x, y), a, b).reg_ot_cost


print([[round(float(v), 4) for v in row] for row in jax.grad(cost)(x)])
prob = linear_problem.LinearProblem(geom, a, b)
print(round(float(jax.jit(sinkhorn.Sinkhorn(lse_mode=False))(prob).reg_ot_cost), 5))
