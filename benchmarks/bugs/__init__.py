"""A public bug corpus for the diagnosis: `python -m benchmarks.bugs` (docs/diagnosis.md keeps its table).

Each case trains twice on one CPU thread through the public plugin API — a hand-written loop with
TraceRecorder against another loop or against a Lightning Trainer with TraceCallback — compares the
two with compare_traces, and scores the diagnosis against what the case states (cases.py).
"""
