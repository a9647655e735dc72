"""``python -m asc_onnx``."""

import sys

from .entry import main

sys.exit(main())
