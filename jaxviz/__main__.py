"""`python -m jaxviz FILE.py`: see jaxviz.cli."""

import sys

from jaxviz.cli import main

if __name__ == "__main__":
    sys.exit(main())
