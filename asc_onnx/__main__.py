"""``python -m asc_onnx``."""

import sys

from .cli import main

sys.exit(main())
