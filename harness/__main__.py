import sys

from harness.launcher import main

sys.exit(main())
