"""The leak probe on the rows of a run made before the evaluation replayed it.

    python benchmarks/leak_probe.py RUN [--out FILE]

The probe is what the original gave back on the leak estimate's report draw (its consistent
values, each with the prefix it came back after), replayed at those prefixes on every row's
model (``dfsu.evaluation.probe``: ``probe_of``, ``replay``; the same code the
evaluation runs, with the probe kept in RUN/eval/leak-probe.json). Prints, per row, E-Hit, the
estimate's consistent values and the probe (hit percent, values given back), then the Spearman
correlation of each measure with E-Hit over the rows. ``--out``: a copy of RUN/results.json with
each row's ``leak_estimate.probe`` filled in and a "provenance" note saying so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from dfsu.evaluation.metrics import spearman


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--out", type=Path, help="write results.json with the probe filled in")
    args = parser.parse_args()

    from dfsu.cli.common import run_config
    from dfsu.components.models import pick_device
    from dfsu.evaluation.leak import leak_meter
    from dfsu.evaluation.probe import probe_of, replay
    from dfsu.rundir import RunPaths
    from dfsu.stages.evaluate import _load_for_eval

    paths = RunPaths(args.run)
    cfg = run_config(args.run, [])
    device = pick_device(cfg.runtime.device)
    results = json.loads(paths.results.read_text())
    cache = paths.root / "eval" / "leak-probe.json"
    _, tokenizer = _load_for_eval(paths.target, None, "cpu")  # every row's tokenizer
    meter = leak_meter(cfg, args.run, tokenizer, "report")
    probe = probe_of(meter, paths.target, cache, device)
    for row in results["rows"]:
        saved = json.loads(paths.eval(row["method"]).read_text())
        model, tokenizer = _load_for_eval(saved["model"], saved["adapter"], device)
        row["leak_estimate"]["probe"] = replay(meter, model.eval(), tokenizer, device, probe)
        got = row["leak_estimate"]["probe"]
        print(
            f"{row['method']:>14}  E-Hit {row['E_Hit']:5.1f}  estimate "
            f"{row['leak_estimate']['consistent']:4d}  probe {got['hit_pct']:5.1f} % "
            f"({got['given_back']}/{got['values']})",
            flush=True,
        )
    rows = [r for r in results["rows"] if r.get("E_Hit") is not None]
    e_hit = [r["E_Hit"] for r in rows]
    for name, key in (("estimate", "consistent"), ("probe", "probe")):
        values = [r["leak_estimate"][key] for r in rows]
        values = [v["hit_pct"] if isinstance(v, dict) else v for v in values]
        print(f"Spearman({name}, E-Hit) over {len(rows)} rows: {spearman(values, e_hit):.2f}")
    if args.out:
        write_filled_in(results, "probe", "leak_estimate.probe", "leak_probe.py", args.out)
    return 0


def write_filled_in(results: dict, key: str, what: str, script: str, out: Path) -> None:
    """``results`` (a run's results.json with ``what`` filled in) to ``out``, its provenance
    saying so under ``key``, with this checkout's commit."""
    from dfsu.files import atomic_write_json

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    note = f"{what} filled in by benchmarks/{script} at {commit or '?'}"
    results.setdefault("provenance", {})[key] = note
    atomic_write_json(out, results)


if __name__ == "__main__":
    raise SystemExit(main())
