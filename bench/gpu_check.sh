#!/usr/bin/env bash
# The GPU device check (issue 36): one command on a machine with an NVIDIA GPU, under
# 8 minutes. It prints a summary and exits non-zero if any stage failed.
#
#     bash bench/gpu_check.sh
#
# Stages:
#   1. install: a venv with plax and the cuda13 extra. With the package index reachable, that
#      is `pip install -e '.[cuda13,test]'` (jaxlib 0.10.2 and its plugin). Without it (a
#      sealed GPU machine), the venv sees the system's packages (a jaxlib with its CUDA
#      plugin already there) and plax is installed without dependencies.
#   2. devices: plax's device list and default backend.
#   3. tests: the test suite's GPU-marked subset (tests/gpu, -m gpu).
#   4. smoke: the showcase (examples/demo.py) on the GPU. It covers arrays, grad, vmap, scan,
#      control flow, shard_map over the GPUs, pure_callback, linalg and random.
#   5. bench: bench/bench_gpu.py, plax next to JAX on the same GPU. JAX comes from a scratch
#      venv outside the repo (jax[cuda13]==0.10.2) when the index is reachable, else from the
#      system Python.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${PLAX_GPU_VENV:-.venv-gpu}
LOG=${PLAX_GPU_LOG:-/tmp/plax-gpu-check}
mkdir -p "$LOG"
declare -a SUMMARY
FAILED=0

stage() {  # stage NAME COMMAND...: run it, log it, record the outcome
    local name=$1; shift
    local start=$SECONDS
    echo "=== $name: $*"
    if "$@" 2>&1 | tee "$LOG/$name.log"; then
        SUMMARY+=("ok    $name ($((SECONDS - start)) s)")
    else
        SUMMARY+=("FAIL  $name ($((SECONDS - start)) s): see $LOG/$name.log")
        FAILED=1
    fi
}

online() { timeout 20 python3 -m pip download --no-deps -q -d "$LOG/probe" pip >/dev/null 2>&1; }

install() {
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import plax, jaxlib" 2>/dev/null; then
        echo "reusing $VENV"
    elif online; then
        python3 -m venv "$VENV" && "$VENV/bin/pip" install -q -e '.[cuda13,test]' || return 1
    else
        echo "package index unreachable: using the system's jaxlib and CUDA plugin"
        python3 -m venv --system-site-packages "$VENV" &&
            "$VENV/bin/pip" install -q --no-deps --no-build-isolation -e . || return 1
    fi
    "$VENV/bin/python" -c "import jaxlib; print('jaxlib', jaxlib.__version__)"
}

jax_python() {  # a Python with JAX on CUDA, for the comparison
    if online; then
        local jv=/tmp/plax-jax-gpu
        [ -x $jv/bin/python ] || { python3 -m venv $jv &&
            $jv/bin/pip install -q 'jax[cuda13]==0.10.2'; } >&2 || return 1
        echo $jv/bin/python
    elif python3 -c "import jax" 2>/dev/null; then
        command -v python3
    fi
}

devices() {
    "$VENV/bin/python" - <<'EOF'
import plax
print("devices:", plax.devices(), "| default backend:", plax.default_backend())
assert plax.default_backend() == "gpu", "plax did not start the CUDA backend"
EOF
}

bench() {
    local jp
    jp=$(jax_python)
    if [ -z "$jp" ]; then echo "(no JAX with CUDA here: plax's column only)"; fi
    JAX_PYTHON=$jp "$VENV/bin/python" bench/bench_gpu.py
}

command -v nvidia-smi >/dev/null && nvidia-smi -L
stage install install
if [ $FAILED = 0 ]; then
    stage devices devices
    stage tests "$VENV/bin/python" -m pytest -q -p no:cacheprovider -m gpu tests/gpu
    stage smoke "$VENV/bin/python" examples/demo.py
    stage bench bench
fi

echo
echo "=== GPU check summary ($SECONDS s)"
printf '%s\n' "${SUMMARY[@]}"
grep -E "passed|failed" "$LOG/tests.log" 2>/dev/null | tail -1
sed -n '/^benchmark/,$p' "$LOG/bench.log" 2>/dev/null
exit $FAILED
