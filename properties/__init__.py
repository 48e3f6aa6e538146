"""What is checked: hypothesis strategies, the generic checks, and one spec per op (ops/)."""
