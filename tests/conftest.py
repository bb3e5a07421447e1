"""Test set-up: 8 virtual CPU devices, so multi-device code is always exercised."""
import atexit
import os
import shutil
import sys
import tempfile

os.environ.setdefault("PLAX_NUM_CPU_DEVICES", "8")
# The persistent compilation cache stays on, in a directory of this session's (subprocesses
# inherit it), never the user's.
os.environ["PLAX_CACHE_DIR"] = tempfile.mkdtemp(prefix="plax-test-cache-")
os.environ.pop("PLAX_COMPILATION_CACHE_DIR", None)
atexit.register(shutil.rmtree, os.environ["PLAX_CACHE_DIR"], True)
sys.path.insert(0, os.path.dirname(__file__))  # for `import helpers`
