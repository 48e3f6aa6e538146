"""Step 5, record: a kernel's declared waivers applied to its CaseRecords (vocabulary.records, the
one thing every report reads)."""
