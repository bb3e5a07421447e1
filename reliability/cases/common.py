"""What the reliability cases share (no jax here: each case imports it, as JAX or as plax)."""
import gc
import os
import sys

QUICK = "--quick" in sys.argv  # smaller sizes, for `make test`


def size(full: int, quick: int) -> int:
    return quick if QUICK else full


def rss_mb() -> float:
    """This process's resident memory in MiB."""
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def result(ok: bool, detail: str) -> None:
    """The case's last line, and its exit status."""
    print(f"RESULT: {'ok' if ok else 'FAIL'}: {detail}", flush=True)
    sys.exit(0 if ok else 1)


def flat(samples: list, what: str, slack_mb: float) -> tuple:
    """Whether RSS samples (MiB, taken at even steps) stay flat over the second half: the
    growth from the middle sample to the last is at most ``slack_mb``."""
    growth = samples[-1] - samples[len(samples) // 2]
    return growth <= slack_mb, f"{what}: RSS {samples[0]:.0f} -> {samples[-1]:.0f} MiB " \
                               f"(+{growth:.1f} over the second half, allowed {slack_mb})"


def settle() -> None:
    gc.collect()
