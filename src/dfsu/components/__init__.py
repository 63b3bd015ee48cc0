"""Components: the parts stages share (model loading, device and precision, schedules,
batches, general text, the training loop, HTML pieces, the allocator setting).

The stage modules (``dfsu.stages``) import components and never each other; components
import no stage module (``tests/test_architecture.py``).
"""
