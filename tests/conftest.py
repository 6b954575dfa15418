import sys
from pathlib import Path

# Test helpers (examples_support) are imported as plain modules.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_configure(config):
    # devmod's result cache goes to a folder of this test session, never the user's cache.
    import os
    import tempfile
    os.environ.setdefault("DEVMOD_CACHE_DIR", tempfile.mkdtemp(prefix="devmod-test-cache-"))
