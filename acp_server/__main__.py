"""`python -m acp_server ...` is the `talaria` command (editors may launch either)."""

import sys

from acp_server.cli import main

sys.exit(main())
