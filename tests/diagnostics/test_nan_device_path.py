"""The NaN tests again on an accelerator's path, run on the CPU (CI has no accelerator).

On a TPU the watch checks a jitted call's outputs later, from flags reduced on the device
(`NanWatch._on_device_call`); there the findings were once at the call's line with the
generic wording, and Infs that `jnp.where` masked were reported: a check held the call's
inputs by weak reference only, so an argument the user did not keep (`f(jnp.zeros(3))`) was
gone before the call was localised, and a masked Inf passed to a call seemed never used
again. Each test here runs a NaN test of the suite on that path (`reader`: the CPU arrays
count as device ones), with jaxviz's reader thread reading the flags at once, never, or as it
runs: the findings are the same as on the host.
"""
from __future__ import annotations

import pytest

from tests.diagnostics import (
    test_corpus,
    test_frontends,
    test_held_out,
    test_later_nans,
    test_messages,
    test_nan_causes,
    test_realcode,
)
from tests.diagnostics.corpus import CASES

_NAN_CASES = sorted(n for n in CASES if n.startswith("nan_"))
# the clean programs where a NaN or Inf is made and masked on purpose, or a gradient is
_CLEAN = ["safe_where_grad", "adam_by_hand", "while_loop_newton", "mlp_donation"]


@pytest.mark.parametrize("name", _NAN_CASES)
def test_corpus_case(name, reader):
    test_corpus.test_case(name)


@pytest.mark.parametrize("name", _CLEAN)
def test_corpus_clean(name, reader):
    test_corpus.test_clean(name)


_fe, _ho, _ln, _me, _nc = (test_frontends, test_held_out, test_later_nans, test_messages,
                           test_nan_causes)
_SVD = "jnp.linalg.svd(m)[0].sum()"
TESTS = {
    "gradient names the forward op": _fe.test_nan_gradient_names_the_forward_op_not_its_neighbours,
    "forward or gradient": _fe.test_nan_messages_say_forward_or_gradient_as_it_happened,
    "masked eager": _fe.test_a_masked_eager_nan_stays_unreported,
    "used again": _fe.test_a_nan_used_again_is_not_said_to_have_become_nan_and_an_inf_is,
    "where-log over lines": lambda: _ho.test_a_where_log_gradient_over_several_lines_is_at_the_log(
        True
    ),
    "program's infinities": _ln.test_infinities_the_program_puts_there_are_not_reported,
    "inf warning, nan error": _ln.test_an_inf_is_a_warning_a_nan_an_error,
    "nan fill value": _me.test_a_nan_fill_value_is_the_programs_own_constant,
    "hint fits": _me.test_the_nan_hint_fits_how_the_value_went_bad,
    "forward under grad": lambda: _nc.test_a_forward_nan_under_grad_is_named_as_the_forward_value(
        False, None
    ),
    "masked forward": _nc.test_a_masked_forward_nan_is_still_the_gradient_s,
    "derivative's log": _nc.test_a_derivative_s_own_log_is_blamed_on_the_op_the_line_calls,
    "svd": lambda: _nc.test_a_gradient_nan_from_svd_names_svd_and_why(_SVD),
    "top-k sampling": lambda: test_realcode.test_no_warning_or_error("topk_sampling"),
}


@pytest.mark.parametrize("name", sorted(TESTS))
def test_nan_test(name, reader):
    TESTS[name]()
