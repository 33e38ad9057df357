"""Turning work (FLOPs and bytes) into time on one GPU.

Every component of a forward pass is priced as a roofline,
``seconds = max(FLOPs / FLOP-rate[dtype], bytes / HBM-bandwidth)``, per GPU and per pass
(seed 000, "The marginal-cost curve"). Arrays broadcast over batch B, tokens per
sequence T and context S.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from spectune.core.hardware import GPU

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Work:
    """FLOPs and bytes of one component, per GPU per pass.

    Bytes are split by what they are: ``weight_bytes`` (parameters read),
    ``kv_bytes`` (KV cache read and written), ``act_bytes`` (activations, attention
    queries, logits). ``dtype`` is the storage format whose tensor-core rate the FLOPs run at.
    """

    flops: Array
    weight_bytes: Array
    kv_bytes: Array
    act_bytes: Array
    dtype: str

    @property
    def bytes(self) -> Array:
        return self.weight_bytes + self.kv_bytes + self.act_bytes

    def __add__(self, other: Work) -> Work:
        if other.dtype != self.dtype:
            raise ValueError("cannot add work of different compute formats")
        return Work(
            self.flops + other.flops,
            self.weight_bytes + other.weight_bytes,
            self.kv_bytes + other.kv_bytes,
            self.act_bytes + other.act_bytes,
            self.dtype,
        )

    def scaled(self, factor: float | Array) -> Work:
        return Work(
            self.flops * factor,
            self.weight_bytes * factor,
            self.kv_bytes * factor,
            self.act_bytes * factor,
            self.dtype,
        )


@dataclass(frozen=True)
class Component:
    """A priced component: FLOPs, bytes (HBM, or link bytes for ``comm``), seconds, and
    the two sides of its roofline (``compute_seconds``, ``memory_seconds``); ``fixed``
    marks time that is neither (engine overhead, collective latency)."""

    flops: Array
    bytes: Array
    seconds: Array
    compute_seconds: Array
    memory_seconds: Array
    fixed_seconds: Array

    def __add__(self, other: Component) -> Component:
        return Component(
            self.flops + other.flops,
            self.bytes + other.bytes,
            self.seconds + other.seconds,
            self.compute_seconds + other.compute_seconds,
            self.memory_seconds + other.memory_seconds,
            self.fixed_seconds + other.fixed_seconds,
        )

    def scaled(self, factor: float | Array) -> Component:
        """The same component repeated ``factor`` times (e.g. over identical layers; an
        array: a share of steps per grid point)."""
        return Component(self.flops * factor, self.bytes * factor, self.seconds * factor,
                         self.compute_seconds * factor, self.memory_seconds * factor,
                         self.fixed_seconds * factor)

    def bound(self) -> NDArray[np.str_]:
        """``compute``, ``memory`` or ``fixed``: which term sets this component's time."""
        out = np.where(self.compute_seconds > self.memory_seconds, "compute", "memory")
        return np.where(self.fixed_seconds > np.maximum(self.compute_seconds, self.memory_seconds),
                        "fixed", out)


def price(work: Work, gpu: GPU, achieved: bool = True) -> Component:
    """The roofline time of ``work`` on ``gpu`` (achievable rates unless ``achieved`` is False)."""
    t_compute = work.flops / gpu.flops_rate(work.dtype, achieved)
    t_memory = work.bytes / gpu.bandwidth(achieved)
    zero = np.zeros_like(t_compute)
    return Component(work.flops, work.bytes, np.maximum(t_compute, t_memory), t_compute, t_memory, zero)


def fixed(seconds: Array) -> Component:
    """Time that no roofline covers (engine overhead)."""
    s = np.asarray(seconds, dtype=float)
    zero = np.zeros_like(s)
    return Component(zero, zero, s, zero, zero, s)


def intensity(work: Work) -> Array:
    """Arithmetic intensity, FLOP per byte."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(work.bytes > 0, work.flops / work.bytes, 0.0)
