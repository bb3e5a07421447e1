import jax, jax.numpy as jnp
import diffrax

def solve(k):
    term = diffrax.ODETerm(lambda t, y, args: -args * y + jnp.sin(t))
    sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), t0=0.0, t1=2.0, dt0=0.1, y0=jnp.array([1.0, 2.0]),
                              args=k, saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 2.0, 5)),
                              stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-8))
    return sol.ys

ys = jax.jit(solve)(0.7)
g = jax.grad(lambda k: solve(k)[-1].sum())(0.7)
print(" ".join(f"{v:.7f}" for v in ys.ravel()))
print(f"{float(g):.7f}")
