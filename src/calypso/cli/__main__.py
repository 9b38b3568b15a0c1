"""`python -m calypso.cli`: the `calypso` command."""

import sys

from calypso.cli import main

sys.exit(main())
