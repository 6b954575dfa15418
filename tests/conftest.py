import sys
from pathlib import Path

# Test helpers (examples_support) are imported as plain modules.
sys.path.insert(0, str(Path(__file__).resolve().parent))
