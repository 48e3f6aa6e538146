"""Report writers. They read records (harness.record.CaseRecord dicts) and nothing else."""
