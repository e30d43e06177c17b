"""What the raw loop and the Lightning twin share: config, network, data, determinism, trace."""

from ddp_parity.trace import FORMAT_VERSION, TraceRecorder

__all__ = ["FORMAT_VERSION", "TraceRecorder"]
