"""`python -m faultloop.cli`: how the workflow's rules call the command line."""

import sys

from faultloop.cli.main import main

sys.exit(main())
