"""The first-order primitives, one file per family (the public names are ``plax.lax``'s)."""
