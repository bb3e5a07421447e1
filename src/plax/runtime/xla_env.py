"""The environment jaxlib and the BLAS libraries read once, when they load.

``runtime/xla.py`` imports this module before it imports jaxlib, so these are set in time.
A variable the user has set is left as it is.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # silence PJRT's start-up chatter
# The LAPACK kernels run on SciPy's OpenBLAS: its own thread pool fights XLA's (a 256x256 SVD
# swings between 7 ms and 0.9 s), so it runs single-threaded unless the user says otherwise.
# This must be set before SciPy loads its OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
