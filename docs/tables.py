"""Write the tables of docs/results.md from the results files under docs/results/.

    python docs/tables.py             # rewrite the tables in docs/results.md and docs/history.md
    python docs/tables.py --check     # exit 1 when either is out of date
    python docs/tables.py --results DIR --doc FILE [--doc FILE ...] [--check]

A results file is a copy of a run's RUN/results.json (``{"rows": [...]}``) or of a sweep's
DIR/sweep.json (``{"points": [...]}``), named for its table: NAME.json is the table NAME, and
files named NAME-seed0.json, NAME-seed1.json, ... form one table NAME with the mean and sample
standard deviation across seeds beside each seed's value. A table lives in the document between
``<!-- table:NAME -->`` and ``<!-- /table:NAME -->`` (in any of the documents; one may hold a
table another holds too); a table whose markers no document holds is appended at the end of
the last. A table without results files says so. A results file may carry a
top-level "provenance" object (command, commit, machine, date, ...): it is printed under its
table. A region ``<!-- plot:NAME -->`` ... ``<!-- /plot:NAME -->`` gets the Pareto plot of the
seeded table NAME (E-Hit against retain_EM, each row and seed a point, each row's mean a
labelled marker, the retrain apart), written to docs/results/NAME.svg; ``plot:NAME@ATTACK``
the same under an attack of ``evaluation.attacks`` (``plot:rows-unknown@relearn:60``), written to
docs/results/NAME-ATTACK.svg (``:`` as ``-``). Standard library only.
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
PLOT = re.compile(
    r"<!-- plot:(?P<name>[\w.-]+)(?:@(?P<attack>[\w:.-]+))? -->\n.*?"
    r"<!-- /plot:(?P=name)(?:@(?P=attack))? -->",
    re.DOTALL,
)
# (header, how to read it from a results row, decimals)
COLUMNS = [
    ("E-Hit", lambda r: r.get("E_Hit"), "E_Hit", 1),
    # the share of the private records' entities whose value some sample reproduces exactly
    ("ERR", lambda r: r.get("ERR"), "ERR", 1),
    ("retain_EM", lambda r: r.get("retain_EM"), "retain_EM", 1),
    ("PPL", lambda r: r.get("PPL"), None, 2),
    # perplexity on the second domain (corpus.second_domain), which no owner's text holds
    ("PPL 2nd", lambda r: r.get("PPL_second"), None, 2),
    ("NLI", lambda r: r.get("NLI_acc"), None, 1),
    ("leak", lambda r: (r.get("leak_estimate") or {}).get("consistent"), None, 1),
    ("recited", lambda r: ((r.get("recitation") or {}).get("report") or {}).get("exact"), None, 1),
    ("probe", lambda r: _probe(r).get("hit_pct"), None, 1),
    # percent of the samples the original finds nonsense: of the E-Hit samples (the truth) and
    # of the owner's report draw (what `dfsu forget` reads)
    ("garbled", lambda r: r.get("garbled"), None, 1),
    ("garbled draw", lambda r: (r.get("leak_estimate") or {}).get("garbled"), None, 1),
    # E-Hit on the entities whose value the owner's search found on the original, and on the
    # rest (benchmarks/search_reach.py): where the leak the owner cannot see lives
    ("E-Hit found", lambda r: (r.get("search_reach") or {}).get("found_E_Hit"), None, 1),
    ("E-Hit unfound", lambda r: (r.get("search_reach") or {}).get("unfound_E_Hit"), None, 1),
    # the owner's depth measures over the values the original gave back (benchmarks/
    # owner_depth.py) and the evaluator's on the true records (evaluation.attacks lens, mia)
    ("owner lens", lambda r: _depth(r, "lens", "middle"), None, 1),
    ("lens", lambda r: _attack(r, "lens", "middle"), None, 1),
    ("owner AUC", lambda r: _depth(r, "membership", "AUC"), None, 1),
    ("MIA AUC", lambda r: _attack(r, "mia", "AUC"), None, 1),
    # the tokenizer alone over the same found values (evaluation.depth.owner_tokenizer)
    ("owner tokenizer", lambda r: _depth(r, "tokenizer", "AUC"), None, 1),
    # what the row cost: its unlearning stage's seconds and FLOPs (RUN/profile.json) and the
    # percent of the model's weights it trained
    ("seconds", lambda r: _cost(r, "seconds"), None, 0),
    ("TFLOPs", lambda r: _cost(r, "flops", 1e12), None, 1),
    ("trained %", lambda r: _cost(r, "share"), None, 1),
]


def _depth(row: dict, measure: str, key: str) -> float | None:
    return ((row.get("owner_depth") or {}).get(measure) or {}).get(key)


def _attack(row: dict, name: str, key: str) -> float | None:
    """An attack's figure, beside the owner's only (the attack table shows it elsewhere)."""
    if "owner_depth" not in row:
        return None
    attacks = row.get("attacks") or {}
    got = attacks.get(name) or (attacks.get("lens:10") if name == "lens" else None) or {}
    return got.get(key)


def _cost(row: dict, key: str, unit: float = 1.0) -> float | None:
    value = (row.get("cost") or {}).get(key)
    return None if value is None else value / unit


def _probe(row: dict) -> dict:
    return (row.get("leak_estimate") or {}).get("probe") or {}


def _column(header: str):
    """The getter of COLUMNS' column ``header``."""
    return next(get for name, get, _, _ in COLUMNS if name == header)


# (what is compared, the data-free measure, the truth it should rank the rows like)
AGREEMENT = [
    ("leak estimate vs E-Hit", _column("leak"), _column("E-Hit")),
    ("recited vs retain_EM", _column("recited"), _column("retain_EM")),
    ("probe vs E-Hit", _column("probe"), _column("E-Hit")),
    ("garbled draw vs garbled", _column("garbled draw"), _column("garbled")),
    ("owner lens vs lens (middle layer)", _column("owner lens"), _column("lens")),
    ("owner AUC vs MIA AUC", _column("owner AUC"), _column("MIA AUC")),
]


def ranks(values: list[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation (Pearson's on the ranks); None when a side is constant."""
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return None if not sxx or not syy else sxy / (sxx * syy) ** 0.5


def tie_ceiling(truth: list[float]) -> float | None:
    """The highest Spearman a measure without ties can reach against ``truth``: where the
    truth ties rows (MIA AUC 100.0 on six of eight), any order of them is as good as another
    and none matches the tie."""
    order = sorted(range(len(truth)), key=lambda i: truth[i])
    distinct = [0.0] * len(truth)
    for rank, i in enumerate(order):
        distinct[i] = float(rank)
    return spearman(distinct, truth)


def agreement(by_seed: list[dict[str, dict]], seeds: list[int]) -> list[str]:
    """Per seed, how the data-free measures rank the rows against the truth (Spearman), with
    the ceiling the truth's ties set when they set one below 1."""
    lines = []
    for name, measure, truth in AGREEMENT:
        cells = []
        for seed, rows in zip(seeds, by_seed, strict=True):
            pairs = [(measure(r), truth(r)) for r in rows.values()]
            pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
            rho = spearman([a for a, _ in pairs], [b for _, b in pairs])
            if rho is None:
                continue
            ceiling = tie_ceiling([b for _, b in pairs])
            tied = f"; untied, at most {ceiling:.2f}" if ceiling and ceiling < 0.995 else ""
            cells.append(f"seed {seed} {rho:.2f} ({len(pairs)} rows{tied})")
        if cells:
            lines.append(f"Spearman, {name}: " + "; ".join(cells) + ".")
    return ["", " ".join(lines)] if lines else []


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
    unique = dict(zip(files, datas, strict=True))  # a sweep's seeds share one file
    files, datas = list(unique), list(unique.values())
    links = ", ".join(f"[{f.name}]({os.path.relpath(f.resolve(), doc.parent)})" for f in files)
    lines = ["", f"From {links}."]
    for f, d in zip(files, datas, strict=True):
        if isinstance(d.get("provenance"), dict):
            items = "; ".join(f"{k}: {v}" for k, v in d["provenance"].items())
            lines.append(f"- {f.name}: {items}")
    return lines


def shown_columns(rows: list[dict]) -> list[tuple]:
    """The columns some row has a value for (a measure older results files lack is left out)."""
    return [c for c in COLUMNS if any(c[1](r) is not None for r in rows)]


def render_single(path: Path, data: dict, doc: Path) -> list[str]:
    every = data.get("rows") or [r for p in data.get("points", []) for r in p.get("rows", [])]
    columns = shown_columns(every)
    header = ["row", *(c[0] for c in columns)]
    if "points" in data:  # a sweep: one line per grid point and row
        header.insert(0, "point")
        body = [
            [p.get("name", "?"), r["method"], *(single_cell(r, c) for c in columns)]
            for p in data["points"]
            for r in p.get("rows", [])
        ]
        attacked: list[str] = []
    else:
        body = [[r["method"], *(single_cell(r, c) for c in columns)] for r in data["rows"]]
        rows = {r["method"]: r for r in data["rows"]}
        attacked = attack_table([rows], list(rows))
    note = (
        "One run: E-Hit and retain_EM with their 95 % bootstrap intervals (the sampling noise"
        " of the evaluation, not the spread between training runs)."
    )
    return [*table(header, body), *attacked, "", note, *provenance([path], [data], doc)]


def attack_columns(row_lists: list[list[dict]]) -> list[tuple[str, str, str]]:
    """(header, attack, key) for every attack some row carries: E-Hit under each attack,
    retain_EM after each weight attack, the membership AUC and PrivLeak, the lens's top-K
    share at the middle layer and the output."""
    labels: list[str] = []
    for rows in row_lists:
        for r in rows:
            labels += [a for a in r.get("attacks") or {} if a not in labels]
    columns = []
    for label in labels:
        if label == "mia":
            columns += [("MIA AUC", "mia", "AUC"), ("PrivLeak", "mia", "PrivLeak")]
            continue
        if label.startswith("lens"):
            columns += [(f"{label} middle", label, "middle"), (f"{label} output", label, "output")]
            continue
        columns.append((f"E-Hit {label}", label, "E_Hit"))
        if label.startswith(("quant", "relearn")):
            columns.append((f"retain_EM {label}", label, "retain_EM"))
    return columns


def attack_table(by_seed: list[dict[str, dict]], methods: list[str]) -> list[str]:
    """The rows under attack (``evaluation.attacks``), one value per seed as in the main
    table; [] when no row was attacked."""
    columns = attack_columns([list(rows.values()) for rows in by_seed])
    if not columns:
        return []
    body = []
    for method in methods:
        cells = [method]
        for _, attack, key in columns:
            values = [
                ((rows[method].get("attacks") or {}).get(attack) or {}).get(key)
                if method in rows
                else None
                for rows in by_seed
            ]
            cells.append(seeds_cell(values, 1))
        body.append(cells)
    return [
        "",
        "Under attack (`evaluation.attacks`):",
        "",
        *table(["row", *(c[0] for c in columns)], body),
    ]


def render_seeds(seeds: list[tuple[int, Path, dict]], doc: Path) -> list[str]:
    for _, path, data in seeds:
        if "rows" not in data:
            raise ResultsError(f'{path}: a seed file must be a results.json (with "rows")')
    by_seed = [{r["method"]: r for r in data["rows"]} for _, _, data in seeds]
    columns = shown_columns([r for _, _, data in seeds for r in data["rows"]])
    body = []
    for method in ordered_methods([data["rows"] for _, _, data in seeds]):
        cells = [method]
        for _, get, _, decimals in columns:
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
    methods = [cells[0] for cells in body]
    return [
        *table(["row", *(c[0] for c in columns)], body),
        *attack_table(by_seed, methods),
        *agreement(by_seed, [s for s, _, _ in seeds]),
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


def sweep_seeds(data: dict) -> list[tuple[int, dict]]:
    """A sweep with a ``seed`` axis as one results dict per seed (empty otherwise): each row
    named for the point's other values (``dfsu-loop (max_recitation_loss=0.5)``), a row the
    same at every point of its seed (``original``, which no swept value reaches) once."""
    points = data.get("points") or []
    if not points or not all("seed" in p.get("params", {}) for p in points):
        return []
    seeds: dict[int, list[dict]] = {}
    for point in points:
        seeds.setdefault(int(point["params"]["seed"]), []).append(point)
    out = []
    for seed, group in sorted(seeds.items()):
        rows: list[dict] = []
        for point in group:
            values = [
                f"{k.split('.')[-1]}={'off' if v is None else v}"
                for k, v in point["params"].items()
                if k != "seed"
            ]
            for row in point.get("rows", []):
                same = [r for p in group for r in p.get("rows", []) if r["method"] == row["method"]]
                if all(r == row for r in same):
                    if point is group[0]:
                        rows.append(row)
                    continue
                rows.append(dict(row, method=f"{row['method']} ({', '.join(values)})"))
        out.append((seed, {"rows": rows, "provenance": data.get("provenance")}))
    return out


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
            data = read_results(path)
            if seeded := sweep_seeds(data):  # a sweep over seeds: one seeded table
                return render_seeds([(seed, path, d) for seed, d in seeded], doc)
            return render_single(path, data, doc)
        seeds = sorted((seed, path, read_results(path)) for seed, path in files)
        return render_seeds(seeds, doc)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        names = ", ".join(str(p) for _, p in files)
        raise ResultsError(f"{names}: not in the shape of results.json ({exc!r})") from None


def pareto_svg(name: str, files: list[tuple[int | None, Path]], attack: str | None = None) -> str:
    """E-Hit (x, lower is better) against retain_EM (y, higher is better): one small dot per
    row and seed, one labelled marker per row at its mean; the retrain in green, the
    original in grey, data-free rows in blue, the oracle in orange. ``attack``: the figures
    each row reads under that attack (``row["attacks"][attack]``), rows without it left out."""
    rows: dict[str, list[tuple[float, float]]] = {}
    for _, path in sorted(files, key=lambda f: f[0] or 0):
        for r in read_results(path).get("rows", []):
            figures = r if attack is None else (r.get("attacks") or {}).get(attack) or {}
            if figures.get("E_Hit") is not None and figures.get("retain_EM") is not None:
                rows.setdefault(r["method"], []).append((figures["E_Hit"], figures["retain_EM"]))
    size, pad = 420, 50

    def xy(e_hit: float, retain: float) -> tuple[float, float]:
        return pad + e_hit / 100 * size, pad + (1 - retain / 100) * size

    colour = {"retrain": "#2a9d3a", "original": "#888888", "oracle": "#e07b00"}
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size + 2 * pad + 90}" '
        f'height="{size + 2 * pad}" font-family="sans-serif" font-size="11">',
        f'<rect x="{pad}" y="{pad}" width="{size}" height="{size}" fill="none" stroke="#000"/>',
    ]
    for tick in range(0, 101, 20):
        x, y = xy(tick, tick)
        out.append(f'<text x="{x:.0f}" y="{pad + size + 15}" text-anchor="middle">{tick}</text>')
        out.append(f'<text x="{pad - 6}" y="{y + 4:.0f}" text-anchor="end">{tick}</text>')
    out.append(
        f'<text x="{pad + size / 2}" y="{pad + size + 35}" text-anchor="middle">'
        "E-Hit (%, lower is better)</text>"
    )
    out.append(
        f'<text x="14" y="{pad + size / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {pad + size / 2})">retain_EM (%, higher is better)</text>'
    )
    title = name if attack is None else f"{name} after {attack}"
    out.append(f'<text x="{pad}" y="{pad - 12}">{title}: each seed a dot, the mean labelled</text>')
    placed: list[tuple[float, float]] = []  # labels so far: a close one moves down a line
    for method, points in rows.items():
        fill = colour.get(method, "#1f5fbf")
        for e_hit, retain in points:
            x, y = xy(e_hit, retain)
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{fill}" opacity="0.5"/>')
        mean = [sum(v) / len(points) for v in zip(*points, strict=True)]
        x, y = xy(*mean)
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{fill}" stroke="#000"/>')
        ly = y + 4
        while any(abs(ly - py) < 12 and abs(x - px) < 70 for px, py in placed):
            ly += 12
        placed.append((x, ly))
        out.append(f'<text x="{x + 7:.1f}" y="{ly:.1f}">{method}</text>')
    return "\n".join([*out, "</svg>", ""])


def plots(text: str, tables: dict, doc: Path, results: Path) -> tuple[str, dict[Path, str]]:
    """The document with every plot region pointing at its SVG (RESULTS/NAME.svg), and the
    SVGs' contents."""
    files: dict[Path, str] = {}

    def region(match: re.Match) -> str:
        name, attack = match["name"], match["attack"]
        tag = name if attack is None else f"{name}@{attack}"
        if not tables.get(name) or tables[name][0][0] is None:
            body = f"_No seeded results files yet for the plot of `{name}`._"
        else:
            stem = name if attack is None else name + "-" + re.sub(r"[^\w.-]", "-", attack)
            svg = results / f"{stem}.svg"
            files[svg] = pareto_svg(name, tables[name], attack)
            what = "E-Hit against retain_EM" + ("" if attack is None else f" after {attack}")
            body = f"![{tag}: {what}]({os.path.relpath(svg, doc.parent)})"
        return f"<!-- plot:{tag} -->\n{body}\n<!-- /plot:{tag} -->"

    return PLOT.sub(region, text), files


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
        action="append",
        help="a document whose tables are rewritten, repeatable; a table no document holds "
        "is appended to the last (default: docs/results.md and docs/history.md)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 when the document is out of date",
    )
    args = parser.parse_args(argv)
    docs = args.doc or [HERE / "results.md", HERE / "history.md"]
    try:
        tables = collect(args.results)
        texts = [doc.read_text() for doc in docs]
        held = {m["name"] for text in texts for m in REGION.finditer(text)}
        news, svgs = [], {}
        for i, (doc, text) in enumerate(zip(docs, texts, strict=True)):
            # each document its own tables; one no document holds goes to the last
            own = {m["name"] for m in REGION.finditer(text)}
            last = i == len(docs) - 1
            mine = {k: v for k, v in tables.items() if k in own or (last and k not in held)}
            new, files = plots(
                updated(text, mine, doc.resolve()), tables, doc.resolve(), args.results.resolve()
            )
            news.append(new)
            svgs |= files
    except (OSError, ResultsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not tables:
        print(f"no results files under {args.results} yet: every table says so")
    stale = [p for p, body in svgs.items() if not p.is_file() or p.read_text() != body]
    changed = [doc for doc, text, new in zip(docs, texts, news, strict=True) if new != text]
    if args.check:
        if changed or stale:
            what = ", ".join(map(str, changed)) or "the plots"
            print(f"{what} out of date: run python docs/tables.py", file=sys.stderr)
            return 1
        print(f"{', '.join(map(str, docs))} up to date ({len(tables)} table(s) from results files)")
        return 0
    for doc, text, new in zip(docs, texts, news, strict=True):
        if new != text:
            doc.write_text(new)
    for path in stale:
        path.write_text(svgs[path])
    print(f"{', '.join(map(str, docs))}: {len(tables)} table(s) from results files written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
