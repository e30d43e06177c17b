"""mlfoundations/open_clip (v2.20.0) training on a synthetic CSV, and its Lightning port (SCORE.md)."""
