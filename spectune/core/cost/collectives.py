"""Collectives as serving engines run them at decode-sized messages.

A tensor-parallel all-reduce of ``M`` bytes over ``n`` GPUs is one of three algorithms,
picked as vLLM and SGLang pick them (the same rule in both; TensorRT-LLM's AUTO table puts
its one-/two-shot switch at the same sizes for hidden 8192):

- **custom one-shot** (every rank reads every peer's buffer and reduces; 1 step):
  ``t = step + (n - 1) M / (f BW)``,
- **custom two-shot** (reduce-scatter then all-gather through peer buffers; 2 steps):
  ``t = 2 step + 2 (n - 1) / n M / (f BW)``,
- **NCCL ring** (2(n - 1) hops, each paying a per-hop latency):
  ``t = nccl_base + 2 (n - 1) nccl_hop + 2 (n - 1) / n M / (f_nccl BW)``,

with BW the GPU's one-direction scale-up bandwidth (``GPU.link_bandwidth``; on an xGMI mesh
the (n - 1) of its 7 links the n GPUs use, :func:`usable_bandwidth`) and the
constants fitted per GPU (``GPU.collectives``, ``scripts/fit_comm.py``). Which one runs:

- custom all-reduce at world sizes 2, 4, 6, 8 below 8 MiB (vLLM
  ``vllm/distributed/device_communicators/custom_all_reduce.py``: ``_SUPPORTED_WORLD_SIZES``,
  ``max_size=8192 * 1024``, ``should_custom_ar``), on fully connected GPUs (NVSwitch, xGMI) or
  on two GPUs; "not supported on more than two PCIe-only GPUs" -> NCCL;
- one-shot when n = 2, or n <= 4 and M < 512 KiB, or n <= 8 and M < 256 KiB, else two-shot
  (``csrc/custom_all_reduce.cuh`` ``REDUCE_CASE``, vllm-project/vllm; the same in
  sgl-project/sglang ``sgl-kernel/csrc/allreduce/custom_all_reduce.cuh`` and its ROCm twin
  ``custom_all_reduce_hip.cuh``). TensorRT-LLM's SM90 AUTO table
  (``cpp/tensorrt_llm/common/customAllReduceUtils.h``, ``AllReduceBestStrategyTableSM90``) at
  TP 8, hidden 8192: one-shot to 16 tokens (256 KiB), two-shot from 32.

An expert-parallel MoE layer moves each token's ``top_k`` picks to the GPUs holding them
(dispatch, FP8) and back (combine, bf16), DeepEP low-latency style: each phase is one step,

    t = a2a_step + tokens * top_k * (ep - 1) / ep * hidden * bytes / (f_a2a BW).

An all-gather or reduce-scatter of ``M`` bytes in all (the gathered tensor; each of the ``n``
GPUs holds M / n before an all-gather and after a reduce-scatter) is an NCCL ring of n - 1
hops, each GPU receiving (n - 1) / n M:

    t = nccl_base + (n - 1) nccl_hop + (n - 1) / n * M / (f_nccl BW),

with the NCCL all-reduce's constants (``nccl_base``, ``nccl_hop``, ``f_nccl``; the all-reduce
ring is the same hops twice). vLLM's default expert-parallel exchange
(``allgather_reducescatter``, :mod:`spectune.core.cost.comm`) runs them as NCCL collectives
(``vllm/distributed/device_communicators/all2all.py`` ``AgRsAll2AllManager``: ``all_gatherv``
/ ``reduce_scatterv`` of the DP group); SGLang's DP-attention gather under CUDA graphs is an
``all_gather_into_tensor`` and its scatter a ``reduce_scatter_tensor``
(``python/sglang/srt/layers/dp_attention.py``, ``DpPaddingMode.MAX_LEN``). Checked, not
fitted, against nccl-tests ``all_gather`` / ``reduce_scatter`` rows of aiconfigurator-core
0.12.0 (``scripts/fit_comm.py`` prints the error; no row of those ops was fitted on): H100,
8 GPUs, median |log(model/measured)| 0.11 all-gather, 0.06 reduce-scatter, signed -4% / +5%
at <= 1 MiB gathered (tests/data/aic-h100-gather.csv).

Arrays broadcast: ``M`` and ``tokens`` may be grids.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from spectune.core.cost.roofline import Array
from spectune.core.hardware import GPU, Collectives

#: Link kinds; the first two connect every GPU to every other (custom all-reduce at any TP).
LINK_KINDS = ("nvswitch", "xgmi", "pcie")
FULLY_CONNECTED = ("nvswitch", "xgmi")
#: vLLM CustomAllreduce: supported world sizes and ``max_size`` (bytes), see module docstring.
CUSTOM_WORLD_SIZES = (2, 4, 6, 8)
CUSTOM_MAX_BYTES = 8192 * 1024
#: One-shot below these sizes (bytes) at world size <= 4 and <= 8 (REDUCE_CASE).
ONE_SHOT_MAX_BYTES = ((4, 512 * 1024), (8, 256 * 1024))
#: An xGMI platform is a full mesh of 8 GPUs: ``link_bandwidth`` is 7 point-to-point links
#: (stas00/ml-engineering network/README.md: MI300X 7 x 64 GB/s; vllm-project/vllm PR #39080:
#: "Peak busbw = (N-1) x 76.8 GB/s" on MI355X), so n GPUs reach (n - 1) / 7 of it.
XGMI_PEERS = 7


def usable_bandwidth(gpu: GPU, c: Collectives, n: int) -> float:
    """One-direction bytes/s one GPU can move to ``n - 1`` peers: all of ``link_bandwidth``
    through a switch (NVSwitch) or its own bus (PCIe), (n - 1) of 7 mesh links on xGMI."""
    if c.link == "xgmi":
        return gpu.link_bandwidth * min(n - 1, XGMI_PEERS) / XGMI_PEERS
    return gpu.link_bandwidth


def default_collectives(gpu: GPU) -> Collectives:
    """Constants of a GPU without a ``collectives:`` block: every collective step costs the
    profile's ``link_latency`` at the line rate, on a fully connected link (the model
    spectune used before per-algorithm pricing, bandwidth aside)."""
    if gpu.collectives is not None:
        return gpu.collectives
    lat = gpu.link_latency
    return Collectives("nvswitch", lat, 1.0, lat, 0.0, 1.0, lat, 1.0,
                       "default: link_latency per step, line rate")


def custom_allreduce_applies(c: Collectives, n: int) -> bool:
    """Whether the engines' custom all-reduce can run on ``n`` GPUs of this link (below
    :data:`CUSTOM_MAX_BYTES`)."""
    return n in CUSTOM_WORLD_SIZES and (n == 2 or c.link in FULLY_CONNECTED)


def one_shot_max_bytes(n: int) -> float:
    """The size (bytes) below which the custom all-reduce is one-shot on ``n`` GPUs."""
    if n == 2:
        return float(CUSTOM_MAX_BYTES)
    for world, limit in ONE_SHOT_MAX_BYTES:
        if n <= world:
            return float(limit)
    return 0.0


def algorithm(c: Collectives, n: int, nbytes: ArrayLike) -> np.ndarray:
    """``one-shot``, ``two-shot`` or ``nccl``: what an all-reduce of ``nbytes`` on ``n`` GPUs runs."""
    m = np.asarray(nbytes, dtype=float)
    if not custom_allreduce_applies(c, n):
        return np.full(m.shape, "nccl")
    return np.where(m >= CUSTOM_MAX_BYTES, "nccl",
                    np.where(m < one_shot_max_bytes(n), "one-shot", "two-shot"))


def priced_algorithm(gpu: GPU, n: int, nbytes: ArrayLike) -> np.ndarray:
    """The algorithm an all-reduce of ``nbytes`` on ``n`` GPUs is priced as: the engines'
    choice (:func:`algorithm`), except that below their one-shot threshold the cheaper of one-
    and two-shot is taken. The thresholds sit where the engines measured two-shot to overtake
    (vLLM's REDUCE_CASE: "crossover"); the fitted straight one-shot line crosses a little
    earlier (H100, 8 GPUs: 226 KiB against 256 KiB) and would make a larger message cheaper
    at the switch, which the measured rows do not show."""
    m = np.asarray(nbytes, dtype=float)
    c = default_collectives(gpu)
    pick = algorithm(c, n, m)
    two_cheaper = _price(gpu, c, n, m, "two-shot") < _price(gpu, c, n, m, "one-shot")
    return np.where((pick == "one-shot") & two_cheaper & (n > 2), "two-shot", pick)


def _price(gpu: GPU, c: Collectives, n: int, m: Array, algo: str) -> Array:
    lat, wire, _ = _parts(gpu, c, n, m, np.full(m.shape, algo))
    return lat + wire


def _parts(gpu: GPU, c: Collectives, n: int, m: Array, pick: np.ndarray) -> tuple[Array, Array, Array]:
    one, two = pick == "one-shot", pick == "two-shot"
    moved = np.where(one, n - 1.0, 2.0 * (n - 1) / n) * m
    lat = np.select([one, two], [c.step, 2.0 * c.step], c.nccl_base + 2 * (n - 1) * c.nccl_hop)
    fraction = np.where(one | two, c.bandwidth_fraction, c.nccl_bandwidth_fraction)
    return lat + 0.0 * m, moved / (fraction * usable_bandwidth(gpu, c, n)), moved


def allreduce_parts(gpu: GPU, n: int, nbytes: ArrayLike, algo: ArrayLike | None = None
                    ) -> tuple[Array, Array, Array]:
    """(latency seconds, bandwidth seconds, bytes over the links) of one all-reduce of
    ``nbytes`` bytes per GPU on ``n`` GPUs, priced as :func:`priced_algorithm` unless ``algo``
    names one; the bytes are what one GPU moves: (n - 1) M one-shot, 2 (n - 1) / n M else."""
    m = np.asarray(nbytes, dtype=float)
    if n <= 1:
        return np.zeros_like(m), np.zeros_like(m), np.zeros_like(m)
    pick = priced_algorithm(gpu, n, m) if algo is None else np.broadcast_to(np.asarray(algo), m.shape)
    return _parts(gpu, default_collectives(gpu), n, m, pick)


def allreduce_seconds(gpu: GPU, n: int, nbytes: ArrayLike, algo: ArrayLike | None = None) -> Array:
    """Seconds of one all-reduce of ``nbytes`` bytes per GPU on ``n`` GPUs (``algo``: as
    :func:`allreduce_parts`)."""
    lat, wire, _ = allreduce_parts(gpu, n, nbytes, algo)
    return lat + wire


def alltoall_parts(gpu: GPU, ep: int, nbytes: ArrayLike) -> tuple[Array, Array, Array]:
    """(latency seconds, bandwidth seconds, bytes over the links) of one expert-parallel
    dispatch or combine of ``nbytes`` bytes of picks per GPU (local picks included) over ``ep``
    GPUs: ``a2a_step + (ep - 1) / ep * nbytes / (f_a2a BW)``."""
    m = np.asarray(nbytes, dtype=float)
    if ep <= 1:
        return np.zeros_like(m), np.zeros_like(m), np.zeros_like(m)
    c = default_collectives(gpu)
    moved = (ep - 1) / ep * m
    return c.a2a_step + 0.0 * m, moved / (c.a2a_bandwidth_fraction * usable_bandwidth(gpu, c, ep)), moved


def gather_parts(gpu: GPU, n: int, nbytes: ArrayLike) -> tuple[Array, Array, Array]:
    """(latency seconds, bandwidth seconds, bytes over the links) of one NCCL all-gather or
    reduce-scatter on ``n`` GPUs of a tensor of ``nbytes`` bytes in all (gathered size):
    ``nccl_base + (n - 1) nccl_hop + (n - 1) / n * nbytes / (f_nccl BW)``; the bytes are what
    one GPU receives, (n - 1) / n of ``nbytes``."""
    m = np.asarray(nbytes, dtype=float)
    if n <= 1:
        return np.zeros_like(m), np.zeros_like(m), np.zeros_like(m)
    c = default_collectives(gpu)
    moved = (n - 1) / n * m
    lat = c.nccl_base + (n - 1) * c.nccl_hop + 0.0 * m
    return lat, moved / (c.nccl_bandwidth_fraction * usable_bandwidth(gpu, c, n)), moved
