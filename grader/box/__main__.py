"""`python3 -I box.zip`: the supervisor's entry point inside the archive."""

import sys

from .supervisor import main

sys.exit(main())
