import sys

from gpushare.cli import main

sys.exit(main())
