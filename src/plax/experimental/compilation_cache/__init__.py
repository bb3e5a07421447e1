"""``plax.experimental.compilation_cache``: the persistent compilation cache's controls, in
its submodule ``compilation_cache`` (as JAX lays them out)."""
