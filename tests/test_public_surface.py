"""Every public name of JAX 0.10.2 exists on plax, under the same module path, so the surface
can only grow. The data is in tests/surface/ (see surface.py there): a name plax lacks must be
listed in awaiting.txt with the issue that builds it, or in NOT_PROVIDED with a reason."""
import os
import subprocess
import sys

import pytest

from tests.surface.surface import load_awaiting, load_surface, missing_names

SURFACE = load_surface()
AWAITING = load_awaiting()


@pytest.mark.parametrize("module", sorted(SURFACE))
def test_module_has_jax_public_names(module):
    missing = missing_names(module, SURFACE[module])
    awaiting = set(AWAITING.get(module, {}))
    lost = missing - awaiting
    assert not lost, (f"plax lacks {module} names that JAX 0.10.2 has: {sorted(lost)}; build "
                      "them, or list them in tests/surface/awaiting.txt with their issue")
    arrived = awaiting - missing
    assert not arrived, (f"{module}: {sorted(arrived)} now exist on plax; remove their lines "
                         "from tests/surface/awaiting.txt so they stay")


def test_awaiting_lists_only_surface_names():
    for module, names in AWAITING.items():
        assert module in SURFACE, module
        assert set(names) - {"*"} <= set(SURFACE[module]), module


def test_surface_through_import_jax():
    """The same lookups as a JAX program makes them: `import jax.<module>` under python -m plax
    (jaxlib and libraries import jax.* names, so the alias must serve every module)."""
    code = (
        "import sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from tests.surface.surface import load_surface, load_awaiting, missing_names\n"
        "awaiting = load_awaiting()\n"
        "bad = {}\n"
        "for module, names in load_surface().items():\n"
        "    lost = missing_names(module, names, prefix='jax') - set(awaiting.get(module, {}))\n"
        "    if lost: bad[module] = sorted(lost)\n"
        "print(bad)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, "-m", "plax", "-c", code, root],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "{}", result.stdout[-3000:]
