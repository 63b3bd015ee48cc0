"""Memorization metrics (pure, ``metrics``), the batched sampler, perplexity and NLI accuracy,
the leak estimate and its probe, the depth reading, recitations, the attacks. Nothing is
imported here: a command loads the modules it uses."""
