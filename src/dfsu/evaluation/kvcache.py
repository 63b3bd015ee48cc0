"""Room set aside in the KV cache while decoding: each new position written into a buffer in
place instead of concatenated per step (``preallocated``; the sampler's ``decode_batch``)."""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import DynamicLayer


def preallocated(cache: Any, room: int) -> Any:
    """``cache`` with each plain growing layer replaced by one holding ``room`` more positions
    in place (the same keys and values, no concatenation per step); any other cache as is."""
    layers = getattr(cache, "layers", None)
    if isinstance(layers, list):
        for index, layer in enumerate(layers):
            if type(layer) is DynamicLayer and layer.is_initialized:
                layers[index] = RoomyLayer.holding(layer, room)
    return cache


class RoomyLayer(DynamicLayer):
    """A growing cache layer with room set aside: ``update`` writes the new positions into
    a buffer and hands back a view of the positions written so far (exactly the keys and
    values a concatenating layer holds), reallocating only when the room runs out. A layer
    cropped or reordered since (its keys no longer that view) goes on as a plain one."""

    @classmethod
    def holding(cls, layer: DynamicLayer, room: int) -> RoomyLayer:
        new = cls()
        new.device, new.is_initialized = layer.device, True
        length = layer.keys.shape[-2]
        new._keys = _with_room(layer.keys, length + room)
        new._values = _with_room(layer.values, length + room)
        new._written(length)
        return new

    def _written(self, length: int) -> None:
        """``keys`` and ``values``: the buffers' first ``length`` positions."""
        self._length = length
        self.keys, self.values = self._keys[..., :length, :], self._values[..., :length, :]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        # Cropping keeps the buffer but shortens the view; reordering or selecting copies it.
        if self.keys.data_ptr() != self._keys.data_ptr() or self.keys.shape[-2] != self._length:
            return super().update(key_states, value_states)
        end = self._length + key_states.shape[-2]
        if end > self._keys.shape[-2]:
            self._keys = _with_room(self.keys, 2 * end)
            self._values = _with_room(self.values, 2 * end)
        self._keys[..., self._length : end, :] = key_states
        self._values[..., self._length : end, :] = value_states
        self._written(end)
        return self.keys, self.values


def _with_room(states: torch.Tensor, length: int) -> torch.Tensor:
    """A buffer of ``length`` positions holding ``states`` at its start."""
    shape = (*states.shape[:-2], length, states.shape[-1])
    buffer = states.new_empty(shape)
    buffer[..., : states.shape[-2], :] = states
    return buffer
