"""What the raw loop and the Lightning twin share: config, network, data, determinism and the
trace — and the parity plugin's public API:

    TraceRecorder   record a trace from any hand-written loop
    TraceCallback   record the same trace from any Lightning Trainer (imports lightning)
    init_process_group  torch.distributed.init_process_group that survives torchrun --max-restarts
    destroy_process_group  torch.distributed.destroy_process_group that cannot abort a rank at exit
    compare_traces  compare two run directories: the report with its diagnosis and warnings
"""

__all__ = [
    "FORMAT_VERSION",
    "TraceRecorder",
    "TraceCallback",
    "compare_traces",
    "init_process_group",
    "destroy_process_group",
]


def __getattr__(name: str):
    # everything lazily: importing ddp_parity (the pytest plugin does, in every session) costs nothing
    if name in ("TraceRecorder", "FORMAT_VERSION"):
        from ddp_parity import trace

        return getattr(trace, name)
    if name in ("init_process_group", "destroy_process_group"):
        from ddp_parity import distributed

        return getattr(distributed, name)
    if name == "TraceCallback":  # lazily: the raw loop never imports lightning
        from ddp_parity.callback import TraceCallback

        return TraceCallback
    if name == "compare_traces":  # lazily: a training process never needs the comparator
        from ddp_parity.compare.pipeline import compare_traces

        return compare_traces
    raise AttributeError(name)
