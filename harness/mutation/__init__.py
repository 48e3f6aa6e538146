"""The mutation side: mutants generated from kernel source (mutagen), the campaign that runs them and scores the harness, its outcomes, and the compute-sanitizer looks on a GPU."""
