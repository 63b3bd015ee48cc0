"""`python -m dfsu.cli ...` (as under `accelerate launch -m` or `torchrun -m`): the `dfsu`
command."""

import sys

from dfsu.cli import main

sys.exit(main())
