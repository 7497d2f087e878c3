from pssh.cli import main
import sys

sys.exit(main())
