"""The figures README quotes, written from results files recorded under docs/results/.

    python docs/readme_figures.py                      # rewrite README's figure regions
    python docs/readme_figures.py --check              # exit 1 when README disagrees
    python docs/readme_figures.py --record-demo RUN    # docs/results/readme/demo.json
    python docs/readme_figures.py --record-forget OUT  # docs/results/readme/forget.json

A region ``<!-- figures:NAME -->`` ... ``<!-- /figures:NAME -->`` of README.md is written from
docs/results/readme/NAME.json: ``demo`` (the quick start's sentence: the demo's E-Hit rows and
stage seconds) and ``forget`` (the owner's verdict excerpt, rendered by the code `dfsu forget`
prints it with). A recording keeps the commit, the date and what ran beside it (``--note``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
RESULTS = HERE / "results" / "readme"
REGION = re.compile(r"<!-- figures:(?P<name>\w+) -->\n.*?<!-- /figures:(?P=name) -->", re.DOTALL)
# The verdict rows the README's excerpt shows (a measure's name starts with one of these).
EXCERPT = ("values given back", "PII-free texts", "lens", "membership", "after relearn")


def _commit() -> str:
    found = subprocess.run(
        ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return found.stdout.strip() or "unknown"


def record_demo(run: Path, note: str) -> dict:
    rows = json.loads((run / "results.json").read_text())["rows"]
    stages = json.loads((run / "profile.json").read_text())["stages"]
    return {
        "e_hit": {r["method"]: round(r["E_Hit"], 2) for r in rows},
        "stage_seconds": {k: round(v["seconds"], 1) for k, v in stages.items()},
        "provenance": {"commit": _commit(), "date": time.strftime("%Y-%m-%d"), "note": note},
    }


def record_forget(out: Path, note: str) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    seconds = summary.get("seconds")
    return {
        "summary": summary,
        "provenance": {
            "commit": _commit(),
            "date": time.strftime("%Y-%m-%d"),
            "seconds": seconds,
            "note": note,
        },
    }


def render_demo(data: dict) -> str:
    hit, seconds, made = data["e_hit"], data["stage_seconds"], data["provenance"]
    total = sum(seconds.values())

    def part(*prefixes: str) -> float:
        return sum(v for k, v in seconds.items() if k.startswith(prefixes))

    rows = ", ".join(f"{m} {v:.2f}" for m, v in hit.items())
    text = (
        f"Measured on 2 CPU cores, seed 0, {made['date']} (commit {made['commit']}; "
        f"{made['note']}): the demo's stages took {total:.0f} s (target {part('target'):.0f} s, "
        f"tagger {part('tagger'):.0f} s, inverter {part('inverter'):.0f} s, pseudo-PII "
        f"{part('synthesize', 'annotate'):.0f} s, the oracle and dfsu rows "
        f"{part('unlearn'):.0f} s, three evaluations {part('evaluate'):.0f} s); its rows read "
        f"E-Hit {rows} (docs/results/readme/demo.json)."
    )
    return textwrap.fill(text, 95)


def render_forget(data: dict) -> str:
    sys.path.insert(0, str(HERE.parent / "src"))
    from dfsu.owner.page import headline, verdict_rows

    summary = data["summary"]
    lines = textwrap.wrap(headline(summary), 78)
    lines.append(f" {'measure':<31} {'before':<11} {'after':<8} reading")
    for row in verdict_rows(summary):
        if row["measure"].startswith(EXCERPT):
            m, b, a, r = row["measure"], row["before"], row["after"], row["reading"]
            lines.append(f" {m:<31} {b:<11} {a:<8} {r}")
    body = "\n".join(f"   {line}".rstrip() for line in lines)
    made = data["provenance"]
    took = (
        f"   `dfsu forget` took {made['seconds']:.0f} s ({made['note']}; commit {made['commit']}, "
        f"{made['date']}; docs/results/readme/forget.json)."
    )
    return f"   ```text\n{body}\n   ```\n{took}"


RENDER = {"demo": render_demo, "forget": render_forget}


def updated(text: str) -> str:
    def region(match: re.Match) -> str:
        name = match["name"]
        path = RESULTS / f"{name}.json"
        if not path.is_file():
            raise SystemExit(f"error: {path}: missing (record it: --record-{name})")
        body = RENDER[name](json.loads(path.read_text()))
        return f"<!-- figures:{name} -->\n{body}\n<!-- /figures:{name} -->"

    return REGION.sub(region, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when README disagrees")
    parser.add_argument("--readme", type=Path, default=README)
    parser.add_argument("--record-demo", type=Path, metavar="RUN")
    parser.add_argument("--record-forget", type=Path, metavar="OUT")
    parser.add_argument("--note", default="nothing else running", help="what ran beside it")
    args = parser.parse_args(argv)
    for name, source, record in (
        ("demo", args.record_demo, record_demo),
        ("forget", args.record_forget, record_forget),
    ):
        if source is not None:
            path = RESULTS / f"{name}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(record(source, args.note), indent=2) + "\n")
            print(f"recorded {path}")
    text = args.readme.read_text()
    new = updated(text)
    if args.check:
        if new != text:
            print(
                f"{args.readme}: its figures disagree with docs/results/readme/*.json: run "
                "python docs/readme_figures.py",
                file=sys.stderr,
            )
            return 1
        return 0
    if new != text:
        args.readme.write_text(new)
        print(f"rewrote {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
