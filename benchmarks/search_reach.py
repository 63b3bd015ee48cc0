"""How much of what E-Hit sees the owner's search reaches, and where the leak left after
unlearning lives: on the values the search found, or on the ones it never found.

    python benchmarks/search_reach.py RUN [--out FILE]

The owner's leak estimate and probe only see the values its search finds (the original's
consistent values on the report draw, kept in RUN/eval/leak-probe.json). E-Hit asks every true
record at its own prefix. This splits each row's E-Hit (read from RUN/eval/ROW.generations.jsonl,
the same samples the evaluation scored) into the entities whose value the search found on the
original ("found") and the rest ("unfound"), and prints the original's reach: the share of the
entities E-Hit hits on it whose value the search found. It reads the true records, so it is a
simulation measurement, never the owner's. ``--out``: a copy of RUN/results.json with each
row's ``search_reach`` filled in and a "provenance" note saying so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path


def split_hits(samples: list[dict], found: set[str], clean) -> dict[str, float | int]:
    """E-Hit's hits split by whether the entity's value is in ``found`` (pure): each
    sample's distinct entities, hit when one of its generations contains the value (E-Hit's
    rule); ``clean`` maps a value to the form the search keeps."""
    count = {"found": [0, 0], "unfound": [0, 0]}
    for sample in samples:
        gens = [g.strip() for g in sample["generations"]]
        for entity in set(sample["entities"]):
            part = count["found" if clean(entity) in found else "unfound"]
            part[0] += any(entity in g for g in gens)
            part[1] += 1
    out: dict[str, float | int] = {}
    for name, (hit, total) in count.items():
        out[f"{name}_hits"], out[f"{name}_entities"] = hit, total
        out[f"{name}_E_Hit"] = round(100.0 * hit / total, 2) if total else None
    hits = out["found_hits"] + out["unfound_hits"]
    out["reach_pct"] = round(100.0 * out["found_hits"] / hits, 1) if hits else None
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--out", type=Path, help="write results.json with search_reach filled in")
    args = parser.parse_args()

    from dfsu.evaluation.leak import clean_value
    from dfsu.rundir import RunPaths, atomic_write_json

    paths = RunPaths(args.run)
    results = json.loads(paths.results.read_text())
    probe = json.loads((paths.root / "eval" / "leak-probe.json").read_text())["probe"]
    found = {v for row in probe for v in row["values"]}
    print(f"the search found {len(found)} values on the original (report draw)")
    for row in results["rows"]:
        gens = paths.root / "eval" / f"{row['method']}.generations.jsonl"
        if not gens.is_file():
            print(f"{row['method']:>14}  no generations file: skipped")
            continue
        samples = [json.loads(line) for line in gens.read_text().splitlines() if line]
        got = split_hits(samples, found, clean_value)
        row["search_reach"] = got
        print(
            f"{row['method']:>14}  E-Hit {row['E_Hit']:5.1f}  on found values "
            f"{got['found_E_Hit']:5.1f} ({got['found_hits']}/{got['found_entities']})  on "
            f"unfound {got['unfound_E_Hit']:5.1f} ({got['unfound_hits']}/"
            f"{got['unfound_entities']})  hits whose value was found {got['reach_pct']} %",
            flush=True,
        )
    if args.out:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        note = f"search_reach filled in by benchmarks/search_reach.py at {commit or '?'}"
        results.setdefault("provenance", {})["search_reach"] = note
        atomic_write_json(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
