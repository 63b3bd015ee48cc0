"""The unlearning objectives (losses), the method registry, and the recipes that train them:
one run (single), dfsu-loop's rounds (loop), the checks and the stopping policy."""
