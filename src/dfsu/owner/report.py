"""`dfsu forget`'s OUT/summary.json: each unit's view of its measure before and after, in
words (``leak``, ``depth``, ``recitation``, ``perplexity``; the attacks' verdicts), the bound as
the method checked it, the steps (and rounds), the settings. Pure functions of the measures
`dfsu forget` made; nothing of the simulation. Its page: ``page``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dfsu.config import RunConfig, config_to_dict
from dfsu.owner.depth import depth_view
from dfsu.owner.leak import leak_summary, leak_view, paired_examples
from dfsu.owner.perplexity import own_samples_view, perplexity_view
from dfsu.owner.recitation import lost_recitations, recitation_bound_view, recitation_view
from dfsu.unlearning.result import UnlearnSummary


def forget_summary(
    cfg: RunConfig,
    model: Path,
    method: str,
    measured: dict[str, dict[str, Any]],
    unlearned: Path,
    show_pii: bool,
) -> dict[str, Any]:
    """summary.json: the leak estimate and perplexity before and after, the bound as
    checked, the steps (and rounds), the settings."""
    from dfsu.evaluation.verdicts import attack_verdicts

    attacked = measured.pop("attacks", None)
    (_, before), (_, after) = measured.items()
    run = UnlearnSummary.read(unlearned)
    lb, la = leak_view(before["leak_estimate"]), leak_view(after["leak_estimate"])
    depth = depth_view(before.get("depth"), after.get("depth"))
    inside = bool(depth and depth["held_inside"])
    counts, hits = (lb["consistent"], la["consistent"]), (before.get("probe") or {}).get("hit_pct")
    return {
        "model": str(model),
        "method": method,
        "leak": leak_summary(before, after, lb, la),
        "depth": depth,
        "recitation": recitation_view(before.get("recitation"), after.get("recitation")),
        "perplexity": perplexity_view(
            before["report_documents"],
            before["ppl"],
            after["ppl"],
            cfg.unlearning.max_ppl_increase,
            run.check_docs,
        ),
        "own_samples": own_samples_view(
            before.get("own_samples"), after.get("own_samples"), cfg.unlearning.max_ppl_increase
        ),
        "bound": _bound(run),
        "steps": run.steps,
        "kept_step": run.kept_step,
        "stop_reason": run.stop_reason,
        "rounds": [
            {k: getattr(r, k) for k in ("round", "consistent", "degenerate", "garbled", "steps")}
            | {"ppl": r.ppl}
            for r in run.rounds or ()
        ],
        "attacks": None if attacked is None else attack_verdicts(*counts, attacked, inside, hits),
        "examples": paired_examples(before.get("examples"), after.get("examples")),
        "recitation_lost": lost_recitations(before.get("recitation"), after.get("recitation")),
        "values_shown": "true values" if show_pii else "masked",
        # an unlearning with no LoRA modules (the undo copy) writes no adapter
        "outputs": {"merged": "merged"} | ({"adapter": "adapter"} if run.lora_modules else {}),
        "settings": {k: config_to_dict(cfg)[k] for k in ("seed", "unlearning", "leak", "public")},
    }


def _bound(run: UnlearnSummary) -> dict[str, Any]:
    """The perplexity bound as the method checked it, and the recitation bound."""
    kept_ppl = run.kept_check.get("ppl_all_docs", run.kept_check["ppl"])
    return {
        "check_documents": run.check_docs,
        "start": run.start_ppl,
        "kept": kept_ppl,
        "limit": run.ppl_bound,
        "within": kept_ppl <= run.ppl_bound * (1 + 1e-6),
        "recitation": recitation_bound_view(run.recitation_bound, run.kept_check),
    }
