"""tests/lax: make the shared row schema (lax_rows.py) importable from the test modules."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))  # for `import lax_rows`
