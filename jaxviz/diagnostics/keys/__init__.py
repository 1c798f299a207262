"""key-reuse: a PRNG key consumed twice, found in what was staged and in what ran.

uses.py          the vocabulary: a consumption (full or fold), a reuse, which two conflict
flow.py          static: KeyFlow, the walk over a jaxpr that follows key identities;
                 consumed_inputs, what one call consumes of its inputs
alternatives.py  static: the reuses whose draws meet only in a select (not reuses)
ledger.py        runtime: the KeyLedger, keys consumed by the calls a cell makes
place.py         the line a reuse asks the user to change
meant.py         keys reused on purpose (a JVP rule, the same inputs, a fixed closed-over
                 key): infos, with their messages
fixed.py         a key a Python loop consumes again as a fixed key (common random numbers),
                 with its message; fixed_source.py reads the loop's source,
                 fixed_flow.py follows what the draws reach
findings.py      the key-reuse findings, static and runtime
"""
