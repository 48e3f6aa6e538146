"""Isolation: suites run in worker processes (a pool), so a crash, a hang or a sticky CUDA error costs one worker, never the verdict; progress shown while they run."""
