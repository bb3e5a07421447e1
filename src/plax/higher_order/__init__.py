"""Higher-order primitives: primitives that hold jaxprs (pjit, cond, while, scan,
checkpoint, custom_jvp/custom_vjp, shard_map, the generic and windowed reductions), and
lax's functions defined with them (special functions, associative_scan)."""
