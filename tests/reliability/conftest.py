"""The reliability suite: kills during writes, concurrent writers, a full disk, damaged and emptied stores.

``reliability_harness`` (this folder) is shared with ``bench/reliability.py``, the long version.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
