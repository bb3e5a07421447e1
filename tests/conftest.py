"""Test set-up: 8 virtual CPU devices, so multi-device code is always exercised."""
import os
import sys

os.environ.setdefault("PLAX_NUM_CPU_DEVICES", "8")
sys.path.insert(0, os.path.dirname(__file__))  # for `import helpers`
