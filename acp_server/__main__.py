"""`python -m talaria.acp_server ...` is the `talaria` command (editors may launch either)."""

import sys

from talaria.acp_server.cli.main import main

sys.exit(main())
