#!/usr/bin/env bash
# The TPU device check (issue 46): one command on a machine with a TPU, under 10 minutes, with
# no network. It prints a summary and exits non-zero if any stage failed.
#
#     bash bench/tpu_check.sh          (or: make tpu)
#
# It uses the JAX, jaxlib and libtpu installed on the machine (`pip install 'plax[tpu]'` or
# JAX's own `jax[tpu]`): plax runs from this checkout, its src/ put in front of PYTHONPATH
# (extended, never replaced). PLAX_TPU_PYTHON picks the Python (default python3); it needs
# numpy, ml_dtypes, opt_einsum, scipy and pytest besides jaxlib. One process at a time can
# hold a TPU chip, so the stages run one after the other, each in its own process(es):
#   1. devices: plax's platforms by default (the TPU first), the chip's devices, one jit.
#   2. tests: the TPU-marked tests (tests/tpu, -m tpu), the CPU platform beside the TPU.
#   3. suite: part of the device-agnostic test suite on the TPU alone (PLAX_PLATFORMS=tpu),
#      every area (SUITE below); tests needing more devices than the chip has deselect
#      themselves (the needs_devices mark). Matmuls run at "highest" precision here, the
#      precision the suite's CPU tolerances assume; tests/tpu checks the TPU's default.
#   4. bench: bench/bench_tpu.py, plax next to JAX on the chip (JAX_PYTHON, else python3).
#   5. pallas: Pallas kernels compiled through Mosaic on the chip (bench/pallas_chip_smoke.py),
#      then bench/bench_pallas.py (plax's kernels next to jnp and to real JAX's).
#   6. jaxtests: JAX's own tpu_* Pallas test files (PLAX_JAX_TESTS: the folder holding them;
#      skipped without it), run on plax with jaxtests/run.py --platform tpu; with
#      PLAX_JAX_REFERENCE=1 real JAX runs them first and writes jaxtests/reference/tpu/
#      (JAX's test helpers that a wheel lacks, pallas_test_util.py and
#      hypothesis_test_util.py, are laid over a copy of it from PLAX_JAX_TEST_HELPERS). The
#      biggest files are sampled (PLAX_JAX_TESTS_SAMPLE, one case in N, the same cases on both
#      sides: jaxtests/sample_plugin.py); real JAX runs all the files in one process.
# Each stage is time-limited (its budget, within a deadline of PLAX_TPU_DEADLINE seconds for
# the whole check, default 570); a stage out of time is stopped with SIGINT, so pytest still
# prints what it ran. The suite stage names each test as it runs (-v): libtpu aborts the whole
# process on some programs, and the log then still says which test it was.
# PLAX_TPU_STAGES="tests bench" runs some stages only.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PLAX_TPU_PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
LOG=${PLAX_TPU_LOG:-/tmp/plax-tpu-check}
DEADLINE=${PLAX_TPU_DEADLINE:-570}
STAGES=${PLAX_TPU_STAGES:-devices tests suite bench pallas jaxtests}
mkdir -p "$LOG"
rm -f "$LOG"/*.log
declare -a SUMMARY
FAILED=0

# The suite's TPU part: ~1,300 tests, 90 s on one CPU device here (2 CPU cores; the chip pays
# a compile per program, so 3-4 minutes there). Deselected: a test starting plax in a child
# process (the chip is held by this one), one restarting the backends in-process, tests of a
# CPU- or GPU-only lowering or of the default precision (set to "highest" here), the slowest.
SUITE=(
    # core transformations
    tests/test_jit.py tests/test_vmap.py tests/test_autodiff.py
    # control flow and custom derivatives
    tests/higher_order/test_control_flow_cond.py tests/higher_order/test_control_flow_loops.py
    tests/higher_order/test_control_flow_scan.py tests/higher_order/test_custom_derivatives.py
    # sharding on one device (meshes of one, shard_map, pmap), arrays and placement
    tests/sharding tests/runtime/test_array.py
    # random, nn, scipy, linalg
    tests/random/test_keys_and_bits.py tests/nn/test_attention.py
    tests/scipy/test_special.py::test_unary_matches_scipy
    tests/scipy/test_special.py::test_logsumexp_matches_scipy
    tests/scipy/test_special.py::test_softmax_matches_scipy
    tests/numpy/test_linalg.py::test_solve_matches_numpy
    tests/numpy/test_linalg.py::test_inv_matches_numpy_batched
    tests/numpy/test_linalg.py::test_solve_vmap_and_jit
    # lax and numpy, op by op
    tests/lax/test_dot.py tests/lax/test_sort.py tests/lax/test_fft.py
    tests/numpy/test_indexing.py tests/lax/test_reductions.py::test_value
    tests/numpy/test_ufuncs.py::test_unary tests/numpy/test_ufuncs.py::test_binary
    --deselect tests/test_jit.py::test_debug_nans_from_the_environment
    --deselect tests/sharding/test_pmap.py::test_pmap_after_clear_backends_runs_on_the_new_devices
    --deselect tests/lax/test_fft.py::test_multi_dimensional_irfft_is_split_up_on_gpu
    --deselect tests/lax/test_dot.py::test_default_matmul_precision_config
    --deselect "tests/lax/test_dot.py::test_precision_forms[None-None]"
    --deselect tests/test_autodiff.py::test_check_grads_follows_jaxs_numerics
    --deselect tests/test_autodiff.py::test_float64_with_x64
    --deselect tests/test_autodiff.py::test_jacobian_pytree_layout
    --deselect tests/higher_order/test_control_flow_scan.py::test_scan_grads
    --deselect tests/random/test_keys_and_bits.py::test_uniform_range_dtypes_and_moments
    --deselect tests/nn/test_attention.py::test_gradients
    --deselect tests/nn/test_attention.py::test_residual_3d_inputs_and_low_precision
)

stage() {  # stage NAME BUDGET COMMAND...: run it within its time, log it, record the outcome
    local name=$1 budget=$2
    shift 2
    case " $STAGES " in *" $name "*) ;; *) return ;; esac
    local left=$((DEADLINE - SECONDS))
    local limit=$((budget < left ? budget : left))
    if [ "$limit" -lt 15 ]; then
        SUMMARY+=("FAIL  $name: not run, the check's ${DEADLINE} s are spent")
        FAILED=1
        return
    fi
    local start=$SECONDS
    echo "=== $name (at most $limit s): $*"
    timeout -s INT -k 20 "$limit" "$@" 2>&1 | tee "$LOG/$name.log"
    local rc=${PIPESTATUS[0]}
    if [ "$rc" = 0 ]; then
        SUMMARY+=("ok    $name ($((SECONDS - start)) s)")
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        SUMMARY+=("FAIL  $name: stopped after $limit s (its time): see $LOG/$name.log")
        FAILED=1
    else
        SUMMARY+=("FAIL  $name ($((SECONDS - start)) s, exit $rc): see $LOG/$name.log")
        FAILED=1
    fi
}

devices() {
    if command -v lsof >/dev/null && lsof -w /dev/accel* /dev/vfio/* 2>/dev/null | grep -q .; then
        echo "the TPU is held by another process (one at a time can use a chip):"
        lsof -w /dev/accel* /dev/vfio/* 2>/dev/null
        return 1
    fi
    env -u PLAX_PLATFORMS -u JAX_PLATFORMS "$PY" - <<'EOF'
import importlib.metadata as md
import importlib.util
import time
for name in ("numpy", "ml_dtypes", "opt_einsum", "scipy", "jaxlib", "libtpu", "jax", "pytest"):
    try:
        version = md.version(name)
    except md.PackageNotFoundError:
        version = "NOT INSTALLED" if importlib.util.find_spec(name) is None else "(no metadata)"
    print(f"{name:>10} {version}")
t = time.perf_counter()
import plax
import numpy as np
backend = plax.default_backend()
print(f"backends started in {time.perf_counter() - t:.1f} s; default backend: {backend}")
print("devices:", plax.devices())
assert backend == "tpu", "plax did not start the TPU by default"
d = plax.devices()[0]
print(f"device_kind {d.device_kind!r}, coords {d.coords}, core_on_chip {d.core_on_chip}, "
      f"bytes_limit {d.memory_stats()['bytes_limit'] / 2 ** 30:.1f} GiB")
print("cpu devices:", plax.devices("cpu")[:2], "...")
out = plax.jit(lambda x: (x * 2 + 1).sum())(np.arange(1000, dtype=np.float32))
assert float(out) == 1000 * 999 + 1000, out
print("a jit on the chip: ok")
EOF
}

export -f devices
export PY
echo "TPU check of plax at $(git rev-parse --short HEAD 2>/dev/null) with $PY, logs in $LOG"
stage devices 60 bash -c devices
stage tests 120 env PLAX_PLATFORMS=tpu,cpu "$PY" -m pytest -q -p no:cacheprovider -rfE \
    -m tpu tests/tpu
stage suite 270 env PLAX_PLATFORMS=tpu PLAX_DEFAULT_MATMUL_PRECISION=highest \
    "$PY" -m pytest -v -p no:cacheprovider -rfE --tb=short --durations=15 "${SUITE[@]}"
stage bench 240 "$PY" bench/bench_tpu.py

pallas() {
    "$PY" bench/pallas_chip_smoke.py && "$PY" bench/bench_pallas.py
}

jaxtests() {  # JAX's tpu_* Pallas files: real JAX's reference (if asked), then plax's score
    [ -n "${PLAX_JAX_TESTS:-}" ] || { echo "PLAX_JAX_TESTS unset: skipped"; return 0; }
    local only sample=${PLAX_JAX_TESTS_SAMPLE-tpu_pallas_test=16,tpu_ops=4,tpu_pallas_pipeline=2}
    only=$(cd "$PLAX_JAX_TESTS" && ls tpu_*_test.py | sed 's/_test.py$//' | paste -sd, -)
    if [ "${PLAX_JAX_REFERENCE:-0}" = 1 ]; then
        local overlay=/tmp/plax-jax-overlay
        rm -rf "$overlay" && mkdir -p "$overlay"
        cp -r "$("$PY" -c 'import jax, os; print(os.path.dirname(jax.__file__))')" "$overlay/jax"
        cp "$PLAX_JAX_TEST_HELPERS/pallas_test_util.py" "$overlay/jax/_src/pallas/"
        cp "$PLAX_JAX_TEST_HELPERS/hypothesis_test_util.py" "$overlay/jax/_src/"
        PYTHONPATH="$overlay${PYTHONPATH:+:$PYTHONPATH}" JAX_PYTHON=$(command -v "$PY") \
            "$PY" jaxtests/run.py --platform tpu --reference --together --tests "$PLAX_JAX_TESTS" \
            --only "$only" --sample "$sample" --timeout "${PLAX_JAX_TESTS_TIMEOUT:-600}"
    fi
    "$PY" jaxtests/run.py --platform tpu --tests "$PLAX_JAX_TESTS" --only "$only" \
        --sample "$sample" --timeout "${PLAX_JAX_TESTS_TIMEOUT:-600}" --results "$LOG/jaxtests"
}

export -f pallas jaxtests
stage pallas 180 bash -c pallas
stage jaxtests 600 bash -c jaxtests

echo
echo "=== TPU check summary ($SECONDS s)"
printf '%s\n' "${SUMMARY[@]}"
for name in tests suite; do
    line=$(grep -E "(passed|failed|error).* in [0-9.]+s" "$LOG/$name.log" 2>/dev/null | tail -1)
    [ -n "$line" ] && echo "$name: $line"
done
sed -n '/^GPT:/,$p' "$LOG/bench.log" 2>/dev/null
exit $FAILED
