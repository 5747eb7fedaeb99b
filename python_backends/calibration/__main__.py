"""``python -m python_backends.calibration`` runs the reranker-calibrate tool."""

import sys

from .cli import main

sys.exit(main())
