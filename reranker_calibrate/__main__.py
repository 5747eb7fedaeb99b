"""``python -m reranker_calibrate`` runs the reranker-calibrate tool."""

import sys

from .cli import main

sys.exit(main())
