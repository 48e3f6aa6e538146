"""One module per op; each declares it (register_op(OpDecl(...))). Adding an op = adding a file here."""
