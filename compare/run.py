"""Do a hand-written DDP loop and its Lightning twin train the same? Launch both, compare, report.

The design's entry point, kept thin: everything lives in the installed `ddp_parity` package, and
`ddp-parity` (its console script) takes the same flags. `python compare/run.py --help` lists them.
"""

import sys

from ddp_parity.harness.cli import main

if __name__ == "__main__":
    sys.exit(main())
