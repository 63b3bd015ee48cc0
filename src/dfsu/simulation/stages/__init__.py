"""The simulation's two stages: the corpus with its injected records (``corpus``) and the
target trained on it, with the retrain reference (``target``)."""
