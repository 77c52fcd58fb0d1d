"""A tiny calculator: the repository of the SWE-bench-style samples."""
