"""The libraries `make ecosystem` runs on plax, pinned, and how each one's tests are found.

Each entry:
- ``pip``: the distribution and version, installed with ``--no-deps`` (their JAX-free
  dependencies are in ``DEPENDENCIES``);
- ``tests``: where the suite comes from: ``("package", [paths])`` for tests shipped inside
  the installed package, ``("sdist", [paths])`` for tests in the source distribution (fetched
  with ``pip download --no-binary``), ``("git", url, commit, [paths])`` for the test files
  alone of a commit of the library's repository (run against the installed package), or
  ``("readme", [])`` for a library whose published packages and repository hold no tests
  found here: the Python code blocks of its README (from the installed package's metadata)
  are run one by one instead; or ``("programs", [paths])``: a README's examples completed
  into programs of ours (``ecosystem/programs/``) that print figures;
  README blocks and programs alike pass when they print what they print under real JAX;
- ``ignore``: test files left out (each with the reason);
- ``devices``: the CPU device count the suite expects (its own conftest's, or 8);
- ``timeout``: seconds for the whole suite;
- ``file_per_process``: run each test file in a pytest of its own (for suites written for
  Bazel, whose test files leave global state behind);
- ``pytest_args``: more pytest arguments (``-p NAME`` loads ``ecosystem/plugins/NAME.py``);
- ``env``: environment variables the suite needs.
"""

LIBRARIES = {
    "optax": dict(pip="optax==0.2.8", tests=("package", ["optax"]), devices=1, timeout=1500,
                  ignore={"optax/transforms/_accumulation_test.py": "imports flax",
                          "optax/_src/linear_algebra_test.py": "imports flax"}),
    "chex": dict(pip="chex==0.1.92", tests=("package", ["chex"]), devices=1, timeout=600),
    # equinox's packages hold no tests: its repository's, at the v0.13.8 tag.
    "equinox": dict(pip="equinox==0.13.8", tests=(
        "git", "https://github.com/patrick-kidger/equinox",
        "dfadb04884a0fc067fb85282c994f8e5c106941f", ["tests"]), devices=1, timeout=2400),
    "equinox.readme": dict(pip="equinox==0.13.8", tests=("readme", []), devices=1,
                           timeout=600),
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
    # orbax's packages hold no tests: its repository's, at a commit of 0.12.4+ (the newest
    # at hand), run against 0.12.8; a subset covering the checkpoint manager, checkpointers,
    # handlers, serialization, arrays, trees, metadata, paths and the v1 API. Its tests meant
    # for several processes run in one (plugins/orbax_repository.py), except those that need
    # several; like Bazel, a process per test file (in one, handlers registered by one file
    # stay for the next).
    "orbax-checkpoint": dict(pip="orbax-checkpoint==0.12.8", tests=(
        "git", "https://github.com/google/orbax", "3ff7b24aa0e23db4a575f7dc4bc6f815008ac6fd",
        [f"checkpoint/orbax/checkpoint/{path}" for path in (
            "checkpoint_args_test.py", "checkpoint_manager_options_test.py",
            "checkpoint_manager_test.py", "checkpoint_utils_test.py", "msgpack_utils_test.py",
            "single_host_test.py", "test_utils_test.py", "transform_utils_test.py",
            "_src/arrays", "_src/asyncio_utils_test.py", "_src/checkpoint_managers",
            "_src/checkpointers", "_src/composite_test.py", "_src/futures", "_src/handlers",
            "_src/logging/standard_logger_test.py", "_src/logging/prometheus_monitoring_test.py",
            "_src/metadata", "_src/multihost/dispatchers_test.py", "_src/path",
            "_src/serialization", "_src/tree", "experimental/model_surgery",
            "experimental/v1")]), devices=8, timeout=3600, file_per_process=True,
        pytest_args=["--import-mode=importlib", "-p", "orbax_repository"], ignore={
            f"checkpoint/orbax/checkpoint/{path}": why for path, why in {
                "_src/metadata/sharding_tpu_test.py": "needs TPUs",
                "_src/path/gcs_utils_test.py": "needs Google Cloud Storage",
                "_src/serialization/cloud_pathways_array_handler_test.py": "needs Pathways",
                "experimental/v1/_src/layout/orbax_layout_multiprocess_test.py":
                    "needs 2 processes",
                "experimental/v1/_src/layout/safetensors_layout_multiprocess_test.py":
                    "needs 4 processes",
                "experimental/v1/_src/partial/saving_multihost_test.py": "needs 2 processes",
                "experimental/v1/_src/synchronization/multihost_test.py": "needs 4 processes",
            }.items()}),
    # gymnax's and jax-md's source distributions hold their suites. jax-md's whole suite takes
    # far over an hour under JAX on 2 cores: its core (spaces, neighbour lists, energies,
    # integrators, minimisers) without the machine-learned potentials and force-field files.
    "gymnax": dict(pip="gymnax==1.0.1", tests=("sdist", ["tests"]), devices=1, timeout=1200),
    "gymnax.readme": dict(pip="gymnax==1.0.1", tests=("programs", [
        "gymnax_readme.py"]), devices=1, timeout=600),
    "jax-md": dict(pip="jax-md==0.2.29", tests=("sdist", [
        f"tests/{name}_test.py" for name in (
            "space", "partition", "smap", "energy", "simulate", "minimize", "quantity",
            "elasticity", "rigid_body", "custom_smap", "custom_partition")]),
        devices=1, timeout=3600),
    "jax-md.readme": dict(pip="jax-md==0.2.29", tests=("programs", ["jax_md_readme.py"]),
                          devices=1, timeout=600),
    # evosax's and ott-jax's packages hold no tests: their repositories', at the commit of the
    # newest release tagged there (evosax 0.3.1's, run against 0.3.2). ott's own fast selection
    # takes over an hour under JAX here: its geometry, math, linear solvers and tools.
    "evosax": dict(pip="evosax==0.3.2", tests=(
        "git", "https://github.com/RobertTLange/evosax",
        "d4b4127708cb2cd0cc906b910ddcd091013153a9", ["tests"]), devices=1, timeout=2400),
    "evosax.readme": dict(pip="evosax==0.3.2", tests=("programs", ["evosax_readme.py"]),
                          devices=1, timeout=600),
    "ott-jax": dict(pip="ott-jax==0.6.0", tests=(
        "git", "https://github.com/ott-jax/ott", "5aa6da0fbd8fe9c255b749ac5fb49f3092860cc4",
        [f"tests/{path}" for path in (
            "geometry", "math", "problems", "initializers/linear", "solvers/linear",
            "tools")]), devices=1, timeout=3600, pytest_args=["-m", "fast"]),
    "ott-jax.readme": dict(pip="ott-jax==0.6.0", tests=("programs", ["ott_readme.py"]),
                           devices=1, timeout=600),
    "grain": dict(pip="grain==0.2.18", tests=("package", ["grain/_src/python", "grain/_src/core"]),
                  devices=1, timeout=2400, pytest_args=["-p", "absl_flags_parsed"], ignore={
                      "grain/_src/core/tf_import_smoke_test.py": "needs TensorFlow",
                      "grain/_src/python/dataset/sources/parquet_dataset_test.py":
                          "needs pyarrow (grain's optional parquet dependency)",
                      **dict.fromkeys([
                          "grain/_src/python/dataset/elastic_iterator_test.py",
                          "grain/_src/python/dataset/transformations/prefetch_test.py",
                          "grain/_src/python/dataset/transformations/process_prefetch_test.py"],
                          "each over 4 minutes under JAX here (worker processes by the dozen)")}),
}

# Keras 3 ships its tests inside its package (keras/src/**/*_test.py); a row per folder, run with
# KERAS_BACKEND=jax and 8 CPU devices (its distribution tests want several). Its repository's
# conftest.py, which the package leaves out, is stood in for by plugins/keras_conftest.py.
# Left out: applications and datasets (they download weights and data) and the other
# backends' own tests. Tests needing TensorFlow or PyTorch fail on both sides, so they count
# for neither (keras/src/distribution's test file imports TensorFlow: the distribution row is
# the JAX backend's distribution tests, moved out of the backend row).
_KERAS_JAX_DISTRIBUTION = "backend/jax/distribution_lib_test.py"
_KERAS_FOLDERS = {
    "layers": ["layers"], "ops": ["ops"], "backend": ["backend"], "models": ["models"],
    "trainers": ["trainers"], "saving": ["saving"], "losses": ["losses"],
    "optimizers": ["optimizers"], "metrics": ["metrics"],
    "distribution": ["distribution", _KERAS_JAX_DISTRIBUTION],
    "random": ["random"], "callbacks": ["callbacks"],
    "rest": ["activations", "constraints", "initializers", "regularizers", "dtype_policies",
             "quantizers", "tree", "utils", "export", "legacy"],
}
for _row, _folders in _KERAS_FOLDERS.items():
    LIBRARIES[f"keras.{_row}"] = dict(
        pip="keras==3.15.1", tests=("package", [f"keras/src/{f}" for f in _folders]),
        devices=8, timeout=3600, env={"KERAS_BACKEND": "jax"},
        pytest_args=["-p", "keras_conftest", "-n", "2", "-W", "ignore"],
        ignore={**{f"keras/src/backend/{other}": "another backend's own tests" for other in (
            "tensorflow", "torch", "numpy", "openvino")},
            f"keras/src/{_KERAS_JAX_DISTRIBUTION}": "the distribution row's"}
        if _row == "backend" else {})

# The libraries' dependencies that do not depend on JAX, pinned (tfp-nightly is distrax's
# probability substrate; its JAX substrate imports JAX lazily).
DEPENDENCIES = [
    "absl-py==2.5.1", "toolz==1.2.0", "typing_extensions==4.16.0", "wadler_lindig==0.1.8",
    "msgpack==1.2.4", "rich==15.0.0", "pyyaml==6.0.4", "treescope==0.1.10",
    "multipledispatch==1.0.0", "tqdm==4.70.1", "jmp==0.0.4", "tabulate==0.10.0",
    "fastprogress==1.0.3", "cloudpickle==3.1.3", "dm-tree==0.1.10", "attrs==26.1.0",
    "decorator", "gast", "tfp-nightly==0.26.0.dev20261027", "pytest", "pytest-xdist",
    "hypothesis", "einops==0.8.2", "scikit-learn", "pandas",
    "etils[epath,epy]==1.15.0", "fsspec==2026.9.0", "zipp==4.1.2", "prometheus_client==0.26.0",
    "aiofiles==25.1.0", "protobuf==7.36.2", "humanize==4.17.0", "simplejson==4.3.0",
    "psutil==7.2.2", "uvloop==0.23.0", "tensorstore==0.1.86", "array-record==0.8.6",
    "portpicker==1.6.0", "parameterized==0.9.0", "safetensors==0.8.0",
    "gymnasium==1.2.2", "pygame==2.6.1", "matplotlib==3.11.2", "seaborn==0.13.2",
    "dotmap==1.3.30", "sympy==1.14.0", "frozendict==2.5.1", "ml_collections==1.1.0",
    "networkx", "netCDF4==1.7.5.1.post1", "ase==3.29.0", "namex==0.1.0", "optree==0.20.0",
    "h5py==3.16.0",
]

# Libraries built on JAX that the suites need but that are not measured themselves: installed
# with ``--no-deps`` too, so that their ``import jax`` is plax.
JAX_DEPENDENT = ["e3nn-jax==0.21.0", "jaxopt==0.8.5"]
