"""plax.lax: the primitive operations, one module per family."""
from plax.lax.arithmetic import *  # noqa: F401,F403
from plax.lax.transcendental import *  # noqa: F401,F403
from plax.lax.comparison import *  # noqa: F401,F403
from plax.lax.bitwise import *  # noqa: F401,F403
from plax.lax.conversion import *  # noqa: F401,F403
from plax.lax.shapes import *  # noqa: F401,F403
from plax.lax.slicing import *  # noqa: F401,F403
from plax.lax.reductions import *  # noqa: F401,F403
from plax.lax.generic_reduce import reduce  # noqa: F401
from plax.lax.sort import *  # noqa: F401,F403
from plax.lax.indexing import *  # noqa: F401,F403
from plax.lax.dot import *  # noqa: F401,F403
from plax.lax.utility import *  # noqa: F401,F403
from plax.lax.windowed import *  # noqa: F401,F403
from plax.lax.convolution import *  # noqa: F401,F403
from plax.transforms.remat import optimization_barrier  # noqa: F401
from plax.lax.collectives import (  # noqa: F401
    psum, pmax, pmin, pmean, all_gather, psum_scatter, all_to_all, ppermute, pshuffle, axis_index,
    axis_size, pvary, pbroadcast, pcast)
from plax.lax.control_flow.cond import cond, switch, cond_p  # noqa: F401
from plax.lax.control_flow.loops import while_loop, fori_loop, while_p  # noqa: F401
from plax.lax.control_flow.scan import scan, map, scan_p  # noqa: F401
from plax.lax.control_flow.associative_scan import associative_scan  # noqa: F401
from plax.lax.special import *  # noqa: F401,F403
from plax.lax import prng  # noqa: F401  (the Threefry hash and typed-key primitives)
from plax.lax.sharding_constraint import with_sharding_constraint  # noqa: F401
from plax.lax import linalg  # noqa: F401,E402  (after the families it builds on)
from plax.lax.fft import fft, fft_p, FftType  # noqa: F401
