"""``python -m ghsim`` runs the command line."""

import sys

from ghsim.cli import main

sys.exit(main())
