"""python -m ddp_parity.compare.causes [--write FILE]: print docs/diagnosis.md's table of kinds from
the registry, or rewrite it in FILE between its markers."""

from __future__ import annotations

import sys
from pathlib import Path

from ddp_parity.compare.causes import KINDS_TABLE_END, KINDS_TABLE_START, kinds_table


def main(argv: list[str]) -> int:
    if argv[:1] != ["--write"]:
        print(kinds_table())
        return 0
    if len(argv) != 2:
        print("usage: python -m ddp_parity.compare.causes [--write docs/diagnosis.md]", file=sys.stderr)
        return 2
    path = Path(argv[1])
    if not path.is_file():
        print(f"{path}: no such file (the page that holds the table of kinds: docs/diagnosis.md)", file=sys.stderr)
        return 2
    text = path.read_text()
    if KINDS_TABLE_START not in text or KINDS_TABLE_END not in text:
        print(f"{path}: no table-of-kinds markers ({KINDS_TABLE_START!r})", file=sys.stderr)
        return 2
    head, rest = text.split(KINDS_TABLE_START, 1)
    tail = rest.split(KINDS_TABLE_END, 1)[1]
    path.write_text(head + kinds_table() + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
