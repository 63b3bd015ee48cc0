"""Bytes per cached position on disk vs a dense fp32 vocabulary row.

    python benchmarks/logit_cache.py --run RUN      # a run with RUN/inverter (train-inverter)

Reads the shards the inverter stage wrote and divides their size on disk by the number of
positions they hold; the dense row is 4 bytes x the target's vocabulary.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="run directory with RUN/inverter/cache")
    args = parser.parse_args()
    run = Path(args.run)
    vocab = json.loads((run / "target" / "config.json").read_text())["vocab_size"]
    dense = 4 * vocab
    for part in ("train", "eval"):
        cache = run / "inverter" / "cache" / part
        info = json.loads((cache / "info.json").read_text())
        on_disk = sum(p.stat().st_size for p in cache.glob("shard-*.safetensors"))
        per_position = on_disk / info["positions"]
        print(
            f"{part:5s}: {info['positions']:8d} positions, top-k {info['top_k']:4d}: "
            f"{per_position:7.1f} B/position on disk vs {dense} B dense fp32 "
            f"-> 1/{dense / per_position:.0f}"
        )


if __name__ == "__main__":
    main()
