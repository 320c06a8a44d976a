"""fakegpu launcher: runs NCCL programs against the fakegpu coordinator."""

__version__ = "0.1.0"
