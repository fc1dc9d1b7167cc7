"""Which process of a torchrun run this is, and the few collectives the in-process scorer needs.

``torchrun --nproc-per-node N benchmark.py …`` starts N copies of the script with ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` in their environment (and the same across
nodes with its rendezvous). benchmark.py reads them once into a :class:`Ranks` and hands it to the
scorer; a plain ``python benchmark.py`` is one rank of one. The collectives carry Python objects
(clip hashes, the list of clips to embed) over gloo, which needs no GPU: the vectors themselves
travel through the embedding cache's per-rank shards on a shared filesystem, not over the wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    local_world: int = 1

    @property
    def is_main(self) -> bool:
        """Rank 0: merges every rank's vectors, evaluates and writes."""
        return self.rank == 0

    @classmethod
    def from_environment(cls, env) -> Ranks:
        """The torchrun variables of ``env`` (one rank of one when absent); a malformed or
        inconsistent value is a ValueError naming it."""
        def number(name: str, default: int) -> int:
            text = env.get(name)
            if text is None:
                return default
            try:
                return int(text)
            except ValueError:
                raise ValueError(f"{name}={text!r} is not an integer") from None

        world = number("WORLD_SIZE", 1)
        ranks = cls(rank=number("RANK", 0), world=world, local_rank=number("LOCAL_RANK", 0),
                    local_world=number("LOCAL_WORLD_SIZE", world))
        if not (world >= 1 and 0 <= ranks.rank < world and 0 <= ranks.local_rank < ranks.local_world <= world):
            raise ValueError(f"inconsistent torchrun environment: RANK={ranks.rank}, WORLD_SIZE={world}, "
                             f"LOCAL_RANK={ranks.local_rank}, LOCAL_WORLD_SIZE={ranks.local_world}")
        return ranks

    def start(self, timeout_s: float = 3600.0) -> None:
        """Join the process group (gloo, over torchrun's MASTER_ADDR/MASTER_PORT); nothing for one rank.
        ``timeout_s`` bounds a wait for the other ranks (rank 0 evaluates while they wait)."""
        if self.world > 1:
            import torch.distributed as dist

            dist.init_process_group("gloo", rank=self.rank, world_size=self.world, timeout=timedelta(seconds=timeout_s))

    def stop(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()

    def gather(self, obj) -> list:
        """Every rank's ``obj``, in rank order."""
        if self.world == 1:
            return [obj]
        import torch.distributed as dist

        out = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def broadcast(self, obj):
        """Rank 0's ``obj``, on every rank."""
        if self.world == 1:
            return obj
        import torch.distributed as dist

        box = [obj if self.is_main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier()


def rank_device(device: str, ranks: Ranks) -> str:
    """The device a rank runs on: under torchrun, ``auto`` (where CUDA is available) and ``cuda``
    mean the rank's own GPU, ``cuda:LOCAL_RANK``; anything else, and one rank, as given."""
    if ranks.world == 1 or device not in ("auto", "cuda"):
        return device
    import torch

    if device == "auto" and not torch.cuda.is_available():
        return "cpu"
    return f"cuda:{ranks.local_rank}"
