"""Overlapping spans resolved: the longest of each cluster kept (``keep_longest``), in
O(n log n) however long the row, with ``OverlapIndex`` (does an interval overlap any added so
far?) deciding the long clusters."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping

from dfsu.pii.records import Span


class OverlapIndex:
    """Intervals [start, end) added one by one; does a new one overlap any added so far?

    It overlaps one when some added interval starts before its end and ends after its
    start, that is when the largest end among the intervals starting before its end is
    past its start: a Fenwick tree of those largest ends over the sorted possible starts
    answers that in O(log n), and so does an insertion.
    """

    def __init__(self, starts: Iterable[int]):
        self.starts = sorted(set(starts))
        self.largest_end: list[float] = [float("-inf")] * (len(self.starts) + 1)

    def add(self, start: int, end: int) -> None:
        """Add [start, end); ``start`` must be one of the starts given at construction."""
        i = bisect_left(self.starts, start) + 1
        while i < len(self.largest_end):
            if end > self.largest_end[i]:
                self.largest_end[i] = end
            i += i & -i

    def overlaps(self, start: int, end: int) -> bool:
        i = bisect_left(self.starts, end)  # how many possible starts lie before ``end``
        largest = float("-inf")
        while i > 0:
            if self.largest_end[i] > largest:
                largest = self.largest_end[i]
            i -= i & -i
        return largest > start


def keep_longest(spans: Iterable[Span], priority: Mapping[str, int]) -> list[Span]:
    """Keep the longest span of each overlapping cluster (ties: the lower ``priority`` of its
    label, 99 when it has none, then the earlier span given): each span in that order is kept
    when it overlaps none kept so far.

    Spans are taken by start in clusters: a span starts a new one when it starts at or after
    every end so far and after every start so far. No span overlaps one of another cluster,
    so each cluster is decided alone (and a span alone in its cluster, most of them, is kept
    without a look), and the clusters' spans come out in order of start."""
    spans = list(spans)
    starts = [s.start for s in spans]
    ends = [s.end for s in spans]

    def rank(i: int) -> tuple[int, int, int]:
        return (starts[i] - ends[i], priority.get(spans[i].label, 99), i)

    kept: list[Span] = []
    cluster: list[int] = []
    reach = float("-inf")
    for i in sorted(range(len(spans)), key=starts.__getitem__):
        if cluster and starts[i] >= reach and starts[i] > starts[cluster[-1]]:
            if len(cluster) == 1:
                kept.append(spans[cluster[0]])
            else:
                kept += _keep_in(cluster, spans, rank)
            cluster = []
        cluster.append(i)
        if ends[i] > reach:
            reach = ends[i]
    if cluster:
        kept += _keep_in(cluster, spans, rank)
    return kept


def _keep_in(cluster: list[int], spans: list[Span], rank: Callable) -> list[Span]:
    """The spans kept of one cluster (indices into ``spans``), by start (then by rank)."""
    chosen: list[Span] = []
    if len(cluster) <= 8:  # most: each span against the few kept before it
        for span in (spans[i] for i in sorted(cluster, key=rank)):
            if all(span.end <= k.start or k.end <= span.start for k in chosen):
                chosen.append(span)
    else:
        index = OverlapIndex(spans[i].start for i in cluster)
        for span in (spans[i] for i in sorted(cluster, key=rank)):
            if not index.overlaps(span.start, span.end):
                index.add(span.start, span.end)
                chosen.append(span)
    return sorted(chosen, key=lambda s: s.start)  # stable: ties stay in rank order
