"""PII records and spans (``records``), the AI4Privacy reader (``reader``), the generator and
the swap pool (``generator``), the detectors, the tagger and the annotators. Nothing is
imported here: a command loads the modules it uses."""
