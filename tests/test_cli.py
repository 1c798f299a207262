"""`python -m jaxviz FILE.py`: runs a script under capture, prints a summary, exit status."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from jaxviz.capture.policy import COUNTS_EVERY_CALL, JIT_CALLS_WATCHED


def run_cli(tmp_path, source: str, *args: str):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    p = subprocess.run([sys.executable, "-m", "jaxviz", str(script), *args], cwd=tmp_path,
                       capture_output=True, text=True, timeout=240)
    return p, script


def test_cli_summary_and_success(tmp_path):
    p, _ = run_cli(tmp_path, """
        import jax, jax.numpy as jnp
        @jax.jit
        def f(x):
            return jnp.sin(x) * 2
        for _ in range(3):
            y = f(jnp.ones(4))
        print("result", float(y.sum()))
    """)
    assert p.returncode == 0, p.stderr
    assert "result 6.73" in p.stdout
    if JIT_CALLS_WATCHED >= 3 or COUNTS_EVERY_CALL:
        assert "jit f(f32[4]): 3 calls (line 7 x3), 2 eqns" in p.stdout
    else:  # Python 3.11: the site's first calls, then JAX's fast path (unseen)
        n = JIT_CALLS_WATCHED
        assert f"jit f(f32[4]): {n}+ calls (line 7 x{n}), 2 eqns" in p.stdout, p.stdout


def test_cli_script_exception_exits_1_with_its_traceback(tmp_path):
    p, script = run_cli(tmp_path, """
        import jax.numpy as jnp
        x = jnp.ones(3)
        raise RuntimeError("boom")
    """)
    assert p.returncode == 1
    assert "RuntimeError: boom" in p.stderr
    assert f'File "{script}", line 4' in p.stderr


def test_cli_bad_inputs(tmp_path):
    p = subprocess.run([sys.executable, "-m", "jaxviz", str(tmp_path / "missing.py")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "cannot read" in p.stderr
    p, _ = run_cli(tmp_path, "x = (1,\n")
    assert p.returncode == 1 and "train.py:1: error: syntax:" in p.stderr


def test_cli_script_sees_its_argv_and_exit_code(tmp_path):
    p, _ = run_cli(tmp_path, """
        import sys
        print("argv", sys.argv[1:])
        sys.exit(0)
    """, "--lr", "3")
    assert p.returncode == 0 and "argv ['--lr', '3']" in p.stdout


def test_cli_html_option_after_the_script(tmp_path):
    out = tmp_path / "report.html"
    p, _ = run_cli(tmp_path, """
        import sys, jax, jax.numpy as jnp
        print("argv", sys.argv[1:])
        y = jax.jit(lambda x: x + 1)(jnp.ones(2))
    """, "--lr", "3", "--html", str(out))
    assert p.returncode == 0, p.stderr
    assert "argv ['--lr', '3']" in p.stdout
    assert out.exists() and "<script" in out.read_text()


def test_cli_traceback_starts_at_the_script(tmp_path):
    p, script = run_cli(tmp_path, """
        def f():
            raise KeyError("k")
        f()
    """)
    assert p.returncode == 1
    first = p.stderr.split("Traceback (most recent call last):")[1].strip().splitlines()[0]
    assert first.startswith(f'File "{script}"')
    assert "jaxviz" not in p.stderr.split("KeyError")[0]


def test_cli_nans_names_the_operation(tmp_path):
    src = """
        import jax, jax.numpy as jnp
        step = jax.jit(lambda w: (w * 1e3) - (w * 1e3) * 0.5)
        w = jnp.ones(4)
        for _ in range(30):
            w = step(w)
    """
    p, _ = run_cli(tmp_path, src, "--nans")
    assert p.returncode == 1
    assert "train.py:3: error: nan: " in p.stdout and "NaN from `sub`" in p.stdout


def test_cli_script_runs_as_main_module_and_keeps_its_exit_status(tmp_path):
    p, _ = run_cli(tmp_path, """
        import pickle, sys, dataclasses
        import jax.numpy as jnp
        @dataclasses.dataclass
        class State:
            step: int
        blob = pickle.dumps(State(3))
        print("restored", pickle.loads(blob).step)
        sys.exit(3)
    """)
    assert "restored 3" in p.stdout, p.stderr
    assert p.returncode == 3 and "Traceback" not in p.stderr


def test_cli_and_text_twin_print_the_fix_under_each_finding(tmp_path):
    """Issue 45, item 10: the fix is printed right under the finding, what to change first,
    then its bad -> good example; in the CLI and in the text twin alike."""
    import jaxviz
    from jaxviz.diagnostics.rules import RULES

    src = """
        import jax, jax.numpy as jnp
        from jax import random
        key = random.key(0)
        a = random.normal(key, (3,))
        b = random.uniform(key, (3,))
    """
    p, _ = run_cli(tmp_path, src)
    out = p.stdout.splitlines()
    at = next(i for i, line in enumerate(out) if ": warning: key-reuse: " in line)
    hint = RULES["key-reuse"].hint.splitlines()
    assert out[at + 1] == "  fix: " + hint[0], out[at:at + 4]
    assert out[at + 2:at + 1 + len(hint)] == ["  " + h for h in hint[1:]]
    ct = jaxviz.trace_cell(textwrap.dedent(src))
    text = str(ct).splitlines()
    at = next(i for i, line in enumerate(text) if ": warning: key-reuse: " in line)
    assert text[at + 1].strip() == "fix: " + hint[0]
    assert text[at + 2].strip() == hint[1].strip()
