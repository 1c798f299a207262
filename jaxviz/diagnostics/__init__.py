"""Stage 3, diagnostics: what went wrong, at the line the user must change.

rules.py       the rule table: each rule's name, default severity, summary and hints
diagnostic.py  the Diagnostic record, checked against the table
check.py       diagnose_trace / diagnose_cell: every rule, in order
report.py      finding(): a Diagnostic at a line, with its code and the rule's severity
key_findings.py  key-reuse messages (static KeyFlow, runtime KeyLedger, fixed keys)
nan_findings.py  nan messages (the op or derivative that made the value, later NaNs)
errors.py      rules read from an exception (concretization family, non-jax-type, donation,
               nan when jax_debug_nans stopped the program)
leaks.py       leaked-tracer
static.py      large-constant, donation-unusable, recompile
bounds.py      out-of-bounds: indices known at trace time (static), eager ops' (runtime)
keys.py        key-reuse (static over a jaxpr, and at runtime); fixedkeys.py: a fixed key in a loop
nan.py         nan: non-finite values, localised to the op that made them
observer.py    the capture's observer: what the calls reveal while they run
"""
