"""``python -m gpuhost.cli``: the same as the ``gpuhost`` command."""

import sys

from gpuhost.cli import main

sys.exit(main())
