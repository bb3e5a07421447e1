"""The public transformations and their machinery; ``plax/__init__.py`` re-exports them."""
