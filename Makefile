# Both targets set up .venv on first use, then run.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.plax-installed

.PHONY: distributed gpu tpu demo test slow bench ecosystem jaxtests reliability clean

# The install also writes plax's bytecode (compileall writes it even under
# PYTHONDONTWRITEBYTECODE=1, which otherwise has every run compile each module it imports).
$(STAMP): pyproject.toml ecosystem/fast-libraries.txt ecosystem/fast-dependencies.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	$(PY) -m pip install -q -r ecosystem/fast-dependencies.txt
	$(PY) -m pip install -q --no-deps -r ecosystem/fast-libraries.txt
	$(PY) -m compileall -q src
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py
	@echo "--- an unmodified JAX program, run with jax -> plax (python -m plax) ---"
	$(PY) -m plax examples/jax_style_training.jaxpy
	@echo "--- a training run checkpointed with orbax-checkpoint, stopped and resumed ---"
	$(PY) examples/checkpointing.py
	@echo "--- flash attention as two Pallas kernels (interpret mode off a TPU), trained through ---"
	$(PY) examples/pallas_flash_attention.py --steps 20
	@echo "--- Keras 3 (KERAS_BACKEND=jax) on plax: a convnet trained with fit, saved, reloaded ---"
	$(PY) -m plax examples/keras_on_plax.py

# Two worker processes (one per core on CI), each test file kept on one worker. Then the
# sharding and pmap tests again on one device, as a machine with a single device runs them
# (tests needing more are deselected: the needs_devices mark; ~7 s in one process).
# The slower multi-process tests (marked distributed_slow) run in `make distributed`, the
# slower integration runs and the tests listed in tests/slow_tests.txt (marked slow) in
# `make slow`.
test: $(STAMP)
	PLAX_NUM_CPU_DEVICES=8 $(PY) -m pytest -q -n 2 --dist loadfile \
		-m "not distributed_slow and not slow and not gpu and not tpu" tests
	PLAX_NUM_CPU_DEVICES=1 $(PY) -m pytest -q tests/sharding \
		tests/test_debug_print.py::test_pmap_prints_once_per_device

# The slower integration runs `make test` leaves out (marked slow): the rest of the JAX
# programs compared with real JAX's output, the library programs, the longer drop-in programs,
# plax's jit and autodiff tests once more through the jax alias.
slow: $(STAMP)
	PLAX_NUM_CPU_DEVICES=8 $(PY) -m pytest -q -n 2 --dist loadfile \
		-m "slow and not gpu and not tpu" tests

bench: $(STAMP)
	$(PY) bench/bench_eager.py
	$(PY) bench/bench_jit.py
	$(PY) bench/bench_autodiff.py
	$(PY) bench/bench_vmap.py
	$(PY) bench/bench_control_flow.py
	$(PY) bench/bench_random.py
	$(PY) bench/bench_sharding.py
	$(PY) bench/bench_shard_map.py
	$(PY) bench/bench_pmap.py
	$(PY) bench/bench_conv.py
	$(PY) bench/bench_fft.py
	$(PY) bench/bench_linalg.py
	$(PY) bench/bench_tracing.py
	$(PY) bench/bench_distributed.py

# Many processes on this machine (python -m plax.distributed.launch): every multi-process test,
# the slow ones too (a dead process 0, the training step against one process).
distributed: $(STAMP)
	PLAX_NUM_CPU_DEVICES=8 $(PY) -m pytest -q tests/distributed

# On a machine with an NVIDIA GPU: the cuda13 extra, then the GPU-marked tests (they skip,
# saying why, where no GPU is). bench/gpu_check.sh does this and more in one command.
gpu: $(STAMP)
	$(PY) -m pip install -q -e '.[cuda13]'
	$(PY) -m pytest -q -m gpu tests/gpu

# On a machine with a TPU (JAX's jaxlib and libtpu installed, e.g. `pip install -e '.[tpu]'`):
# the TPU-marked tests, part of the suite on the chip and bench/bench_tpu.py next to JAX, in
# one command under 10 minutes (the TPU-marked tests fail where no TPU is; `make test` leaves
# them out).
tpu:
	bash bench/tpu_check.sh

# plax under threads, long runs (memory), compile-cache faults, interrupts, errors, child
# processes and exits, each case in its own process; JAX_PYTHON=/path/to/venv-with-jax/bin/python
# runs every case under real JAX too, side by side. `make test` runs the fast cases.
reliability: $(STAMP)
	$(PY) reliability/run.py $(ARGS)

# Libraries built on JAX (optax, chex, flax, equinox, ...) run on plax with their own tests, in
# a separate venv; ARGS=--reference runs them on real JAX 0.10.2, ARGS="--only optax,chex".
ecosystem: $(STAMP)
	$(PY) ecosystem/run.py $(ARGS)

# JAX's own test files (JAX_TESTS=<dir>, e.g. ../shared/jax-tests/tests) on plax, one pytest
# process per file, scored against the cases real JAX 0.10.2 passes (jaxtests/reference/);
# ARGS="--only fft,lax_numpy_operators", or ARGS=--reference with JAX_PYTHON to rebuild those.
jaxtests: $(STAMP)
	$(PY) jaxtests/run.py --tests $(JAX_TESTS) $(ARGS)

clean:
	rm -rf $(VENV) build src/*.egg-info
