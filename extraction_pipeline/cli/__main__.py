"""``python -m extraction_pipeline.cli``: the same as the ``extraction-pipeline`` command."""

import sys

from extraction_pipeline.cli import main

sys.exit(main())
