"""Write the tables of docs/results.md from the results files under docs/results/.

    python docs/tables.py             # rewrite the tables in docs/results.md
    python docs/tables.py --check     # exit 1 when docs/results.md is out of date
    python docs/tables.py --results DIR --doc FILE [--check]

A results file is a copy of a run's RUN/results.json (``{"rows": [...]}``) or of a sweep's
DIR/sweep.json (``{"points": [...]}``), named for its table: NAME.json is the table NAME, and
files named NAME-seed0.json, NAME-seed1.json, ... form one table NAME with the mean and sample
standard deviation across seeds beside each seed's value. A table lives in the document between
``<!-- table:NAME -->`` and ``<!-- /table:NAME -->``; a table whose markers are missing is
appended at the end. A table without results files says so. A results file may carry a
top-level "provenance" object (command, commit, machine, date, ...): it is printed under its
table. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REGION = re.compile(r"<!-- table:(?P<name>[\w.-]+) -->\n.*?<!-- /table:(?P=name) -->", re.DOTALL)
SEED_FILE = re.compile(r"^(?P<name>.+)-seed(?P<seed>\d+)$")
# (header, how to read it from a results row, decimals)
COLUMNS = [
    ("E-Hit", lambda r: r.get("E_Hit"), "E_Hit", 1),
    ("retain_EM", lambda r: r.get("retain_EM"), "retain_EM", 1),
    ("PPL", lambda r: r.get("PPL"), None, 2),
    ("NLI", lambda r: r.get("NLI_acc"), None, 1),
    ("leak", lambda r: (r.get("leak_estimate") or {}).get("consistent"), None, 1),
]


class ResultsError(Exception):
    """A results file that cannot be read as a table: one line, naming the file."""


def number(value: float | int | None, decimals: int) -> str:
    if value is None:
        return "–"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{decimals}f}"


def single_cell(row: dict, column: tuple) -> str:
    """One run's value, with its 95 % interval when the row carries one."""
    _, get, ci_key, decimals = column
    value = get(row)
    ci = (row.get("ci") or {}).get(ci_key) if ci_key else None
    if value is None or not ci:
        return number(value, decimals)
    return f"{number(value, decimals)} [{number(ci[0], decimals)}, {number(ci[1], decimals)}]"


def seeds_cell(values: list[float | int | None], decimals: int) -> str:
    """``mean ± sd (v0, v1, ...)`` over the seeds that have a value; sd is the sample standard
    deviation (n - 1); a seed without the value shows "–"."""
    present = [v for v in values if v is not None]
    each = ", ".join(number(v, decimals) for v in values)
    if not present:
        return "–"
    if len(present) == 1:
        return f"{number(float(present[0]), decimals)} ({each})"
    mean, sd = statistics.mean(present), statistics.stdev(present)
    return f"{number(float(mean), decimals)} ± {number(float(sd), decimals)} ({each})"


def table(header: list[str], body: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cells) + " |" for cells in body]


def read_results(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ResultsError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(data, dict) or not (
        isinstance(data.get("rows"), list) or isinstance(data.get("points"), list)
    ):
        raise ResultsError(f'{path}: neither a results.json ("rows") nor a sweep.json ("points")')
    return data


def ordered_methods(row_lists: list[list[dict]]) -> list[str]:
    seen: list[str] = []
    for rows in row_lists:
        seen += [r["method"] for r in rows if r.get("method") not in seen]
    return seen


def provenance(files: list[Path], datas: list[dict], doc: Path) -> list[str]:
    links = ", ".join(f"[{f.name}]({os.path.relpath(f.resolve(), doc.parent)})" for f in files)
    lines = ["", f"From {links}."]
    for f, d in zip(files, datas, strict=True):
        if isinstance(d.get("provenance"), dict):
            items = "; ".join(f"{k}: {v}" for k, v in d["provenance"].items())
            lines.append(f"- {f.name}: {items}")
    return lines


def render_single(path: Path, data: dict, doc: Path) -> list[str]:
    header = ["row", *(c[0] for c in COLUMNS)]
    if "points" in data:  # a sweep: one line per grid point and row
        header.insert(0, "point")
        body = [
            [p.get("name", "?"), r["method"], *(single_cell(r, c) for c in COLUMNS)]
            for p in data["points"]
            for r in p.get("rows", [])
        ]
    else:
        body = [[r["method"], *(single_cell(r, c) for c in COLUMNS)] for r in data["rows"]]
    note = (
        "One run: E-Hit and retain_EM with their 95 % bootstrap intervals (the sampling noise"
        " of the evaluation, not the spread between training runs)."
    )
    return [*table(header, body), "", note, *provenance([path], [data], doc)]


def render_seeds(seeds: list[tuple[int, Path, dict]], doc: Path) -> list[str]:
    for _, path, data in seeds:
        if "rows" not in data:
            raise ResultsError(f'{path}: a seed file must be a results.json (with "rows")')
    by_seed = [{r["method"]: r for r in data["rows"]} for _, _, data in seeds]
    body = []
    for method in ordered_methods([data["rows"] for _, _, data in seeds]):
        cells = [method]
        for _, get, _, decimals in COLUMNS:
            values = [get(rows[method]) if method in rows else None for rows in by_seed]
            cells.append(seeds_cell(values, decimals))
        body.append(cells)
    numbers = ", ".join(str(s) for s, _, _ in seeds)
    note = (
        f"Mean ± sample standard deviation across seeds {numbers}; each seed's value in "
        "parentheses, in that order."
    )
    files = [p for _, p, _ in seeds]
    datas = [d for _, _, d in seeds]
    return [
        *table(["row", *(c[0] for c in COLUMNS)], body),
        "",
        note,
        *provenance(files, datas, doc),
    ]


def collect(results: Path) -> dict[str, list[tuple[int | None, Path]]]:
    """Table name -> its files: [(None, NAME.json)] or [(seed, NAME-seedS.json), ...]."""
    tables: dict[str, list[tuple[int | None, Path]]] = {}
    for path in sorted(results.glob("*.json")) if results.is_dir() else []:
        match = SEED_FILE.match(path.stem)
        name, seed = (match["name"], int(match["seed"])) if match else (path.stem, None)
        tables.setdefault(name, []).append((seed, path))
    for name, files in tables.items():
        if len(files) > 1 and any(seed is None for seed, _ in files):
            raise ResultsError(f"{results}: both {name}.json and {name}-seedS.json files")
    return tables


def render(name: str, files: list[tuple[int | None, Path]], doc: Path) -> list[str]:
    if not files:
        return [
            f"_No results files yet for this table: it is written from `{name}.json` or "
            f"`{name}-seed0.json`, `{name}-seed1.json`, ... under `docs/results/` (copies of "
            "`RUN/results.json`) by `python docs/tables.py`._"
        ]
    try:
        if files[0][0] is None:
            path = files[0][1]
            return render_single(path, read_results(path), doc)
        seeds = sorted((seed, path, read_results(path)) for seed, path in files)
        return render_seeds(seeds, doc)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        names = ", ".join(str(p) for _, p in files)
        raise ResultsError(f"{names}: not in the shape of results.json ({exc!r})") from None


def updated(text: str, tables: dict, doc: Path) -> str:
    """The document with every table region rewritten; tables without a region appended."""

    def region(name: str) -> str:
        body = "\n".join(render(name, tables.get(name, []), doc))
        return f"<!-- table:{name} -->\n{body}\n<!-- /table:{name} -->"

    present = {m["name"] for m in REGION.finditer(text)}
    text = REGION.sub(lambda m: region(m["name"]), text)
    for name in sorted(set(tables) - present):
        text = text.rstrip("\n") + f"\n\n### Table `{name}`\n\n{region(name)}\n"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--results",
        type=Path,
        default=HERE / "results",
        help="folder of results files (default: docs/results)",
    )
    parser.add_argument(
        "--doc",
        type=Path,
        default=HERE / "results.md",
        help="document whose tables are rewritten (default: docs/results.md)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 when the document is out of date",
    )
    args = parser.parse_args(argv)
    try:
        tables = collect(args.results)
        text = args.doc.read_text()
        new = updated(text, tables, args.doc.resolve())
    except (OSError, ResultsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not tables:
        print(f"no results files under {args.results} yet: every table says so")
    if args.check:
        if new != text:
            print(f"{args.doc} is out of date: run python docs/tables.py", file=sys.stderr)
            return 1
        print(f"{args.doc} is up to date ({len(tables)} table(s) from results files)")
        return 0
    if new != text:
        args.doc.write_text(new)
    print(f"{args.doc}: {len(tables)} table(s) from results files written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
