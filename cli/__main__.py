import sys

from ldptel.cli.main import main

sys.exit(main())
