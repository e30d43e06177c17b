"""The harness's modes, one per module: the default launch-and-compare, --traces, --matrix,
--fault, --reference and --mistake."""
