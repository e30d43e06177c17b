"""A corpus of real training programs as their authors wrote them (tiny configs, CPU, gloo, 2 ranks), each
instrumented only as docs/plugin.md says, beside a Lightning port; `python -m benchmarks.programs` runs every
pair and compares it (docs/programs.md has the programs, their sources and the port's rounds)."""
