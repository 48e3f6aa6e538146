"""The op engine: an op declaration (harness.registry.declare.OpDecl) turned into everything the
suite runs. ``derive`` (DeclaredOp: floor, strategy, inputs, oracle, tolerance), ``reference``
(``from_reference``: a declaration inferred from a torch function), ``checks`` (the checks every
op gets), ``layouts`` / ``apart`` / ``leading`` (how a case's tensors are placed), ``strategies``
(hypothesis draws), ``beyond`` (cases past the example's size), ``case_params`` (a typed case id
checked), ``values`` / ``row_kinds`` (the value kinds inputs are drawn from).

The project's op declarations and mutant catalogs live in ``properties/`` and import this
package; the engine never imports them (the registry finds them by module name).
"""

__all__: list[str] = []
