"""Test set-up: 8 virtual CPU devices, so multi-device code is always exercised."""
import os

os.environ.setdefault("PLAX_NUM_CPU_DEVICES", "8")
