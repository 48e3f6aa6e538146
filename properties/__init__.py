"""The project's op declarations (ops/: one OpDecl per op), mutant catalogs (mutants/) and data
(verify_costs.json). The engine that turns a declaration into cases, inputs, oracle and checks
is harness.ops; it never imports this package (the registry loads ops/ by module name)."""
