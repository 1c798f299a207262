"""Stage 3, diagnostics: what went wrong, at the line the user must change.

The frame every rule shares (the table, the record, finding(), the order they run in, the
observer), then one module or folder per rule family, holding its analysis and its messages:

rules.py       the rule table: each rule's name, default severity, summary and hints
diagnostic.py  the Diagnostic record, checked against the table
report.py      finding(): a Diagnostic at a line, with its code and the rule's severity
check.py       diagnose_trace / diagnose_cell: every family, in order
observer.py    the capture's observer: what the calls reveal while they run
errors.py      rules read from an exception (concretization family, non-jax-type,
               use-after-donate, nan when jax_debug_nans stopped the program)
leaks.py       leaked-tracer
constants.py   large-constant
donation.py    donation-unusable
bounds.py      out-of-bounds: indices known at trace time (static), eager ops' (runtime)
recompile/     recompile: which traces repeat a function, why, the findings
keys/          key-reuse: KeyFlow (static), the KeyLedger (runtime), fixed and meant keys
nans/          nan: non-finite values seen while the calls run, localised to the op that
               made them; later NaNs the cell kept
"""
