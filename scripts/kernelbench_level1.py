"""The KernelBench benchmark under its first name: scripts/kernelbench_levels.py, for any level."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelbench_levels import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
