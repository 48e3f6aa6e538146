"""Report writers. They read records (vocabulary.records.CaseRecord dicts) and nothing else."""
