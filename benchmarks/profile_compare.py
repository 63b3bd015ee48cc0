"""Compare a run's stage profile with an earlier run's profile of the same config.

    python benchmarks/profile_compare.py NEW_RUN OLD_RUN

Prints, per stage, the seconds of each run and the ratio old/new (above 1: the new run is
faster), tokens/s and MFU, and the totals; warns when the two runs' configs differ (their
stages then measure different work). Figures come from RUN/profile.json, which every
`dfsu run` writes (for runs made before profiles: the stage times in results.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _load(run: str) -> dict:
    """RUN/profile.json, or for a run made before profiles, the stage times in results.json."""
    path = Path(run) / "profile.json"
    if path.is_file():
        return json.loads(path.read_text())
    results = Path(run) / "results.json"
    if not results.is_file():
        sys.exit(f"{run}: neither profile.json nor results.json (not a finished run directory)")
    timings = json.loads(results.read_text()).get("timings", {})
    return {"config_hash": None, "stages": {k: {"seconds": v} for k, v in timings.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("new", help="run directory (the change)")
    parser.add_argument("old", help="run directory (the baseline)")
    args = parser.parse_args()
    new, old = _load(args.new), _load(args.old)
    if new.get("config_hash") != old.get("config_hash"):
        print("warning: the two runs have different configs; stages may do different work\n")
    print(f"{'stage':28} {'old s':>8} {'new s':>8} {'old/new':>8} {'tok/s':>10} {'MFU':>6}")
    names = list(old["stages"]) + [n for n in new["stages"] if n not in old["stages"]]
    total_old = total_new = 0.0
    for name in names:
        a, b = old["stages"].get(name), new["stages"].get(name)
        sa = a["seconds"] if a else None
        sb = b["seconds"] if b else None
        total_old += sa or 0.0
        total_new += sb or 0.0
        ratio = f"{sa / sb:8.2f}" if sa and sb else f"{'–':>8}"
        tps = f"{b['tokens_per_s']:10,.0f}" if b and b.get("tokens_per_s") else f"{'–':>10}"
        mfu = f"{100 * b['mfu']:5.0f}%" if b and b.get("mfu") is not None else f"{'–':>6}"
        fa = f"{sa:8.1f}" if sa is not None else f"{'–':>8}"
        fb = f"{sb:8.1f}" if sb is not None else f"{'–':>8}"
        print(f"{name:28} {fa} {fb} {ratio} {tps} {mfu}")
    ratio = total_old / total_new if total_new else float("nan")
    print(f"{'total':28} {total_old:8.1f} {total_new:8.1f} {ratio:8.2f}")


if __name__ == "__main__":
    main()
