"""``python -m reranker_model`` runs the reranker-model tool."""

import sys

from .cli import main

sys.exit(main())
