"""tests/higher_order: make the shared control-flow helpers (control_flow_util.py) importable."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))  # for `import control_flow_util`
