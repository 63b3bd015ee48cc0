"""How much of the package a command loads: runs `dfsu ARGS` in this process, then prints how
many of the package's modules (every .py under src/dfsu) it imported, their share, and with
``--list`` which. The owner's command should load what it runs and little else.

    python benchmarks/imports.py [--list] forget --model MODEL --out OUT [...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import dfsu
from dfsu.cli import main as dfsu_main


def package_modules() -> set[str]:
    root = Path(dfsu.__file__).parent
    names = set()
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def main() -> int:
    args = sys.argv[1:]
    listing = "--list" in args
    args = [a for a in args if a != "--list"]
    rc = dfsu_main(args)
    every = package_modules()
    loaded = sorted(m for m in sys.modules if m in every)
    share = 100 * len(loaded) / len(every)
    print(
        f"dfsu {args[0]}: exit {rc}; loaded {len(loaded)} of the package's {len(every)} "
        f"modules ({share:.0f} %)"
    )
    if listing:
        print("\n".join(f"  {m}" for m in loaded))
        print("not loaded:\n" + "\n".join(f"  {m}" for m in sorted(every - set(loaded))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
