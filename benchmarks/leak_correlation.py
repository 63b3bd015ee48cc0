"""How well the data-free leak estimate follows the true E-Hit.

    python benchmarks/leak_correlation.py RUN [RUN ...]

For each run: the Spearman rank correlation between ``leak_estimate.consistent`` and E-Hit
across its results rows, and across the checks of every unlearning summary that recorded both
(``unlearning.keep_by=leak`` with ``unlearning.track_privacy=true``); then across all rows of
all runs. Also the share of consistent values that are true private values (simulation only).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dfsu.evaluation.metrics import spearman


def main(runs: list[str]) -> int:
    every = []
    for name in runs:
        run = Path(name)
        rows = json.loads((run / "results.json").read_text())["rows"]
        pairs = [
            (r["method"], r["leak_estimate"]["consistent"], r["E_Hit"], r["leak_estimate"])
            for r in rows
            if r.get("leak_estimate") and r.get("E_Hit") is not None
        ]
        every += pairs
        cells = ", ".join(f"{m} {c}/{e:.1f}" for m, c, e, _ in pairs)
        rho = spearman([p[1] for p in pairs], [p[2] for p in pairs])
        true = sum(p[3].get("consistent_true", 0) for p in pairs)
        total = sum(p[1] for p in pairs)
        print(f"{run}: rows rho {rho:.3f} (consistent/E-Hit: {cells})")
        print(f"  consistent values that are true private values: {true}/{total}")
        for summary in sorted(run.glob("unlearned/*/summary.json")):
            checks = [c for c in json.loads(summary.read_text())["checks"] if "leak" in c]
            checks = [c for c in checks if c.get("E_Hit") is not None]
            if len(checks) >= 3:
                rho = spearman([c["leak"] for c in checks], [c["E_Hit"] for c in checks])
                print(f"  checks of {summary.parent.name}: rho {rho:.3f} over {len(checks)}")
    if len(runs) > 1:
        rho = spearman([p[1] for p in every], [p[2] for p in every])
        print(f"all rows of all runs: rho {rho:.3f} over {len(every)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
