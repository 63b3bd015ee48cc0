"""Components: the parts stages share (model loading, device and precision, schedules,
batches, the run's records, general text, the training loop, HTML pieces).

A stage module (``corpus``, ``target``, ``inversion.train``, ``synthesis``,
``unlearning.trainer``, ``evaluation.evaluate``, ``report``) imports components and never
another stage module; components import no stage module (``tests/test_architecture.py``).
"""
