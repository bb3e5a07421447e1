"""Interpreters beyond the core transformations: checkify and the key-reuse checker."""
