"""The seed documents' workflows beside verification: training integration (train-check), the benchmark protocol (bench) and the tutorial's exercise."""
