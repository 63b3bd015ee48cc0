"""Does the owner's depth measure agree with the evaluator's? Over the rows of a run, the
owner's lens and membership (``evaluation.depth``: the values the original gave back on the
leak estimate's report draw, in the contexts it gave them back in, no record read) against
the evaluator's (``lens:K`` and ``mia`` of ``evaluation.attacks``: the true records).

    python benchmarks/owner_depth.py RUN [RUN ...] [--out-dir DIR] [--extra NAME,...]

Each RUN must have evaluated its rows with ``evaluation.attacks`` holding ``lens`` (or
``lens:10``) and ``mia``. Prints, per run, each row's four figures, the owner's tokenizer
reading, and the Spearman rank correlation of owner vs evaluator across the rows (lens middle
layer; AUC), with the seconds the owner's measures took per model. ``--extra``: rows
evaluated apart (``dfsu evaluate --out RUN/eval/NAME.json``) read beside the run's own.
``--out-dir``: each run's results.json with
``owner_depth`` filled in, as DIR/<RUN name>.json (a "provenance" note says so). The owner's
side reads the sealed target, the owner's swap pool and the report draw only; the true
records are read by the evaluator's figures, already in the run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from leak_probe import write_filled_in  # beside this script


def evaluator_figures(row: dict) -> tuple[float | None, float | None]:
    """The evaluator's lens middle (top 10) and MIA AUC of a results row."""
    attacks = row.get("attacks") or {}
    lens = attacks.get("lens:10") or attacks.get("lens") or {}
    return lens.get("middle"), (attacks.get("mia") or {}).get("AUC")


# what an extra row takes from its evaluation (the keys a run's results rows hold)
ROW_KEYS = ("E_Hit", "ERR", "FRS", "S_Exp", "retain_EM", "PPL", "NLI_acc", "garbled", "attacks")


def measure_run(run: Path, extra: tuple[str, ...] = ()) -> dict:
    """Every row's owner depth figures beside the evaluator's, and the Spearman of each;
    ``extra``: rows evaluated apart (RUN/eval/NAME.json, `dfsu evaluate`) read as well."""
    import time

    from dfsu.boundary import run_owner
    from dfsu.components.models import load_causal_lm, pick_device
    from dfsu.config import load_config
    from dfsu.evaluation.depth import owner_depth, value_contexts
    from dfsu.evaluation.leak import leak_meter
    from dfsu.evaluation.metrics import spearman
    from dfsu.rundir import RunPaths
    from dfsu.stages.evaluate import _load_for_eval

    paths = RunPaths(run)
    cfg = load_config(str(paths.config))
    device = pick_device(cfg.runtime.device)
    owner = run_owner(run)
    model, tokenizer = load_causal_lm(owner.model)
    meter = leak_meter(cfg, run, tokenizer, "report")
    draw = meter(model.to(device).eval(), tokenizer, device)
    contexts = value_contexts(draw, cfg.leak.min_count)
    pool, batch = owner.swap_pool(), cfg.evaluation.batch_size
    results = json.loads(paths.results.read_text())
    for name in extra:
        evaluated = json.loads(paths.eval(name).read_text())
        results["rows"].append({"method": name} | {k: evaluated.get(k) for k in ROW_KEYS})
    print(f"{run}: {len(contexts)} found values in context (report draw of the original)")
    rows = []
    for row in results["rows"]:
        evaluated = json.loads(paths.eval(row["method"]).read_text())
        model, tokenizer = _load_for_eval(evaluated["model"], evaluated.get("adapter"), device)
        started = time.time()
        depth = owner_depth(model, tokenizer, contexts, pool, cfg.seed, batch, device)
        seconds = time.time() - started
        row["owner_depth"] = depth
        lens, auc = evaluator_figures(row)
        got = {
            "row": row["method"],
            "owner_lens": depth["lens"]["middle"],
            "lens": lens,
            "owner_auc": depth["membership"]["AUC"],
            "auc": auc,
            "owner_tokenizer": depth["tokenizer"]["AUC"],
            "seconds": round(seconds, 2),
        }
        rows.append(got)
        print(
            f"{got['row']:>14}  lens middle: owner {got['owner_lens']}, evaluator {lens};  "
            f"AUC: owner {got['owner_auc']}, evaluator {auc};  "
            f"tokenizer AUC: owner {got['owner_tokenizer']};  {seconds:.1f} s",
            flush=True,
        )
    out = {"rows": rows, "values": len(contexts)}
    for name, a, b in (("lens", "owner_lens", "lens"), ("auc", "owner_auc", "auc")):
        pairs = [(r[a], r[b]) for r in rows if r[a] is not None and r[b] is not None]
        rho = spearman([p[0] for p in pairs], [p[1] for p in pairs]) if len(pairs) > 2 else None
        out[f"spearman_{name}"] = None if rho is None else round(rho, 3)
        print(f"  Spearman {name}: {out[f'spearman_{name}']} over {len(pairs)} rows")
    return {"results": results, "agreement": out}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--out-dir", type=Path, help="results.json copies with owner_depth")
    parser.add_argument(
        "--extra", default="", help="rows evaluated apart, comma-separated (RUN/eval/NAME.json)"
    )
    args = parser.parse_args()
    for run in args.runs:
        measured = measure_run(run, tuple(n for n in args.extra.split(",") if n))
        if args.out_dir:
            results = measured["results"]
            results.setdefault("provenance", {})["owner_depth_agreement"] = measured["agreement"]
            out = args.out_dir / f"{run.name}.json"
            write_filled_in(results, "owner_depth", "owner_depth", "owner_depth.py", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
