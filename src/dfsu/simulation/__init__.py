"""The simulation's own material that the owner's side never has: imported by the corpus stage
only (tests/test_architecture.py keeps every data-free module away from it)."""
