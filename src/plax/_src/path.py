"""``jax._src.path``: the path type of file-system locations (the compilation cache's
directory): ``pathlib.Path``, as JAX's when etils is absent."""
import pathlib

Path = pathlib.Path
