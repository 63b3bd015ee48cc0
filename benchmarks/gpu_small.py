"""The table of benchmarks/gpu_small.sh: each seed's stages and rows, in one run.

    python benchmarks/gpu_small.py OUT

OUT holds seedS/ run directories (and seedS.done: the exit status and wall seconds). Prints,
per seed, each stage's seconds, tokens/s and MFU (RUN/profile.json: MFU against the matmul
rate measured on that device at the start of the run) and the wall time, then the rows'
E-Hit, retain_EM, perplexity and NLI accuracy (RUN/results.json), and the same as mean over
the seeds. A run still going or failed is named with its log.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def stage_lines(profile: dict) -> list[str]:
    """One line per stage: seconds, tokens/s, MFU (pure)."""
    lines = []
    for name, stage in profile.get("stages", {}).items():
        rate = stage.get("tokens_per_s")
        mfu = stage.get("mfu")
        lines.append(
            f"  {name:28} {stage.get('seconds', 0):8.1f} s"
            f" {'' if rate is None else f'{rate:>12,.0f} tok/s'}"
            f" {'' if mfu is None else f'{100 * mfu:5.1f} % MFU'}"
        )
    return lines


def row_figures(results: dict) -> dict[str, dict[str, float | None]]:
    """{row: {E_Hit, retain_EM, PPL, NLI_acc, garbled, lens, MIA, relearn}} from a results.json
    (pure; an attack not run: None)."""
    keys = ("E_Hit", "retain_EM", "PPL", "NLI_acc", "garbled")
    rows = {}
    for row in results.get("rows", []):
        attacks = row.get("attacks", {})
        lens = next((v.get("middle") for k, v in attacks.items() if k.startswith("lens")), None)
        rows[row["method"]] = {k: row.get(k) for k in keys} | {
            "lens": lens,
            "MIA": attacks.get("mia", {}).get("AUC"),
            "relearn": attacks.get("relearn:60", {}).get("E_Hit"),
        }
    return rows


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    runs = sorted(p for p in out.glob("seed*") if p.is_dir())
    if not runs:
        print(f"{out}: no seed*/ run directory", file=sys.stderr)
        return 1
    by_row: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        done = run.with_suffix(".done")
        status = done.read_text().split() if done.is_file() else None
        wall = f", wall {status[1]} s" if status else ""
        print(f"{run.name}{wall}" + ("" if status is None or status[0] == "0" else " FAILED"))
        if status is None or status[0] != "0":
            print(f"  not finished: see {run.with_suffix('.log')}")
        profile = run / "profile.json"
        if profile.is_file():
            data = json.loads(profile.read_text())
            device = data.get("matmul", {})
            rate = device.get("flops_per_s", 0) / 1e9
            print(f"  matmul {rate:,.0f} GFLOP/s ({device.get('dtype')}, {device.get('device')})")
            print("\n".join(stage_lines(data)))
        results = run / "results.json"
        if results.is_file():
            for name, figures in row_figures(json.loads(results.read_text())).items():
                shown = "  ".join(f"{k} {v:.2f}" for k, v in figures.items() if v is not None)
                print(f"  {name:12} {shown}")
                for k, v in figures.items():
                    if v is not None:
                        by_row.setdefault(name, {}).setdefault(k, []).append(v)
    if len(runs) > 1 and by_row:
        print("mean over seeds (sd)")
        for name, figures in by_row.items():
            parts = []
            for k, values in figures.items():
                sd = statistics.stdev(values) if len(values) > 1 else 0.0
                parts.append(f"{k} {statistics.mean(values):.2f} ({sd:.2f})")
            print(f"  {name:12} {'  '.join(parts)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
