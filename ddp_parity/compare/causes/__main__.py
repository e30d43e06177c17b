"""python -m ddp_parity.compare.causes [--write FILE]: print docs/diagnosis.md's table of kinds from
the registry, or rewrite it in FILE between its markers (exit 2, one line, the file untouched, for an
unknown option, a missing file, or markers missing or out of order)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddp_parity.compare.causes import KINDS_TABLE_END, KINDS_TABLE_START, kinds_table
from ddp_parity.trace_files import write_bytes_atomic


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ddp_parity.compare.causes", description=__doc__.split("\n\n")[0])
    p.add_argument("--write", metavar="FILE", help="rewrite the table of kinds in FILE (docs/diagnosis.md)")
    return p.parse_args(argv)


def table_replaced(path: Path, text: str) -> str:
    """`text` with the table between its markers replaced; ValueError naming what is wrong."""
    start, end = text.find(KINDS_TABLE_START), text.find(KINDS_TABLE_END)
    if start < 0 or end < 0:
        raise ValueError(f"{path}: no table-of-kinds markers ({KINDS_TABLE_START!r} ... {KINDS_TABLE_END!r})")
    if end < start:
        raise ValueError(
            f"{path}: the table-of-kinds markers are in reverse order ({KINDS_TABLE_END!r} before "
            f"{KINDS_TABLE_START!r}); put the start marker first"
        )
    return text[:start] + kinds_table() + text[end + len(KINDS_TABLE_END) :]  # the table holds its markers


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.write is None:
        print(kinds_table())
        return 0
    path = Path(args.write)
    if not path.is_file():
        print(f"{path}: no such file (the page that holds the table of kinds: docs/diagnosis.md)", file=sys.stderr)
        return 2
    try:
        text = table_replaced(path, path.read_text())
    except OSError as err:
        print(f"{path}: cannot read it ({err.strerror})", file=sys.stderr)
        return 2
    except UnicodeDecodeError:
        print(f"{path}: not UTF-8 text", file=sys.stderr)
        return 2
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    write_bytes_atomic(path, text.encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
