"""One module per op; each defines and registers an OpSpec. Adding an op = adding a file here."""
