"""Report writers. They read records (harness.record.case_record.CaseRecord dicts) and nothing else."""
