"""``plax.experimental.array_serialization``: arrays, sharded or not, written and read per
shard with tensorstore, in JAX's on-disk layout (zarr3 arrays in an OCDBT store), so a
checkpoint written by plax is read by JAX and the other way round. tensorstore is imported
when first used: ``pip install 'plax[checkpoint]'``."""
