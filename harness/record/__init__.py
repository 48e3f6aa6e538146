"""Step 5, record: CaseRecord, the one thing every report reads."""
