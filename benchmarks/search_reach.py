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
from pathlib import Path

from leak_probe import write_filled_in  # beside this script


def split_hits(samples: list[dict], found: set[str], clean) -> dict[str, float | int]:
    """E-Hit's hits split by whether the entity's value is in ``found``: E-Hit's own rule
    (``metrics.e_hit_by_label``) with "found"/"unfound" as the labels; ``clean`` maps a value
    to the form the search keeps."""
    from dfsu.evaluation.metrics import Sample, e_hit_by_label

    rows = [Sample("", "", tuple(s["entities"]), tuple(s["generations"])) for s in samples]
    labels = [{e: "found" if clean(e) in found else "unfound" for e in r.entities} for r in rows]
    by = e_hit_by_label(rows, labels)
    out: dict[str, float | int] = {}
    for name in ("found", "unfound"):
        part = by.get(name, {"hit": 0, "total": 0, "pct": None})
        out[f"{name}_hits"], out[f"{name}_entities"] = part["hit"], part["total"]
        out[f"{name}_E_Hit"] = None if part["pct"] is None else round(part["pct"], 2)
    hits = out["found_hits"] + out["unfound_hits"]
    out["reach_pct"] = round(100.0 * out["found_hits"] / hits, 1) if hits else None
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--out", type=Path, help="write results.json with search_reach filled in")
    args = parser.parse_args()

    from dfsu.evaluation.counting import clean_value
    from dfsu.rundir import RunPaths

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
        write_filled_in(results, "search_reach", "search_reach", "search_reach.py", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
