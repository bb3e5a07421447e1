"""The libraries `make ecosystem` runs on plax, pinned, and how each one's tests are found.

Each entry:
- ``pip``: the distribution and version, installed with ``--no-deps`` (their JAX-free
  dependencies are in ``DEPENDENCIES``);
- ``tests``: where the suite comes from: ``("package", [paths])`` for tests shipped inside
  the installed package, ``("sdist", [paths])`` for tests in the source distribution (fetched
  with ``pip download --no-binary``), or ``("readme", [])`` for a library whose published
  packages hold no tests: the Python code blocks of its README (from the installed
  package's metadata) are run one by one instead;
- ``ignore``: test files left out (each with the reason);
- ``devices``: the CPU device count the suite expects (its own conftest's, or 8);
- ``timeout``: seconds for the whole suite;
- ``env``: environment variables the suite needs.
"""

LIBRARIES = {
    "optax": dict(pip="optax==0.2.8", tests=("package", ["optax"]), devices=1, timeout=1500,
                  ignore={"optax/transforms/_accumulation_test.py": "imports flax",
                          "optax/_src/linear_algebra_test.py": "imports flax"}),
    "chex": dict(pip="chex==0.1.92", tests=("package", ["chex"]), devices=1, timeout=600),
    "equinox": dict(pip="equinox==0.13.8", tests=("readme", []), devices=1, timeout=600),
    "flax.linen": dict(pip="flax==0.12.8", tests=("sdist", ["tests/linen"]), devices=8,
                       timeout=2400),
    "flax.nnx": dict(pip="flax==0.12.8", tests=("sdist", ["tests/nnx"]), devices=8,
                     timeout=2400),
    "haiku": dict(pip="dm-haiku==0.0.17", tests=("package", ["haiku/_src"]), devices=1,
                  timeout=2400),
    "numpyro": dict(pip="numpyro==0.22.0", tests=("sdist", [
        "test/test_handlers.py", "test/test_distributions_util.py", "test/test_transforms.py",
        "test/test_constraints.py", "test/test_optimizers.py", "test/test_util.py",
        "test/test_flows.py", "test/test_nn.py"]), devices=1, timeout=2400),
    # distrax's and blackjax's whole suites take far over an hour under JAX on 2 cores: a
    # subset covering their core distributions, bijectors, samplers and utilities.
    "distrax": dict(pip="distrax==0.1.9", tests=("package", [
        f"distrax/_src/distributions/{name}_test.py" for name in (
            "normal", "bernoulli", "categorical", "beta", "gamma", "laplace", "logistic",
            "mvn_diag", "independent", "uniform", "transformed", "deterministic")] + [
        f"distrax/_src/bijectors/{name}_test.py" for name in (
            "scalar_affine", "tanh", "sigmoid", "chain", "inverse", "block", "shift",
            "lambda_bijector", "diag_linear")]), devices=1, timeout=2400),
    "blackjax": dict(pip="blackjax==1.7.1", tests=("sdist", [
        f"tests/mcmc/test_{name}.py" for name in (
            "integrators", "trajectory", "uturn", "proposal", "metrics", "mala", "barker",
            "elliptical_slice", "random_walk_without_chex", "multinomial_hmc")] + [
        "tests/test_util.py", "tests/test_diagnostics.py", "tests/test_compilation.py",
        "tests/adaptation/test_step_size.py", "tests/smc/test_resampling.py",
        "tests/vi/test_meanfield_vi.py", "tests/optimizers/test_optimizers.py",
        "tests/sgmcmc/test_diffusions.py"]), devices=1, timeout=2400),
    "diffrax": dict(pip="diffrax==0.7.2", tests=("readme", []), devices=1, timeout=600),
    "lineax": dict(pip="lineax==0.1.1", tests=("readme", []), devices=1, timeout=600),
    "optimistix": dict(pip="optimistix==0.1.0", tests=("readme", []), devices=1, timeout=600),
    "jraph": dict(pip="jraph==0.0.6.dev0", tests=("package", ["jraph"]), devices=1,
                  timeout=1200),
    "einops": dict(pip="einops==0.8.2", tests=("package", ["einops/tests"]), devices=1,
                   timeout=600, env={"EINOPS_TEST_BACKENDS": "numpy,jax"}),
    "jaxtyping": dict(pip="jaxtyping==0.3.11", tests=("readme", []), devices=1, timeout=600),
}

# The libraries' dependencies that do not depend on JAX, pinned (tfp-nightly is distrax's
# probability substrate; its JAX substrate imports JAX lazily).
DEPENDENCIES = [
    "absl-py==2.5.1", "toolz==1.2.0", "typing_extensions==4.16.0", "wadler_lindig==0.1.8",
    "msgpack==1.2.4", "rich==15.0.0", "pyyaml==6.0.4", "treescope==0.1.10",
    "multipledispatch==1.0.0", "tqdm==4.70.1", "jmp==0.0.4", "tabulate==0.10.0",
    "fastprogress==1.0.3", "cloudpickle==3.1.3", "dm-tree==0.1.10", "attrs==26.1.0",
    "decorator", "gast", "tfp-nightly==0.26.0.dev20261027", "pytest", "pytest-xdist",
    "hypothesis", "einops==0.8.2", "scikit-learn", "pandas",
]
