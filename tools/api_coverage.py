"""Print llgrad's coverage of PyTorch's public API (see llgrad/_api_coverage.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from llgrad._api_coverage import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
