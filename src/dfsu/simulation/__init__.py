"""The simulation around the owner's path: what builds the corpus and the target that memorizes
it (``simulation.stages``), the rows of `dfsu run` and their results, sweeps, and the record
shapes the owner's side never has (``shapes``). The owner's side (`dfsu forget` and what it
runs) imports nothing of this package; outside it only the command groups that run the
simulation do (tests/test_architecture.py)."""
