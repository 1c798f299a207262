"""The graph view at scale: first paint and expand/collapse in headless Chromium, next to `dot`.

For synthetic graphs of 1k / 5k / 20k equations (one flat body with call-path groups) and
100k equations (nested jit > stages > blocks, scan and cond bodies), the offline HTML page
(`jaxviz.view.html.render_html`) is opened in Debian's Chromium and timed:

- first paint: navigation start to the first canvas frame (inflate + parse the payload,
  build the overview, lay it out, draw), median of 3 loads;
- expand / collapse: opening the largest collapsed cluster on screen and closing it again
  (rebuild of the visible graph + layout + draw, synchronously), median of 5;
- expand-all: opening everything breadth first up to 3000 boxes (ms / boxes shown);
and Graphviz `dot -Tsvg` lays out the same graph (jaxviz.view.dot.to_dot, every node), capped.
Targets (issue 3): first paint <= 1 s, expand/collapse <= 300 ms at 20k flat and 100k nested.

    python bench/bench_widget.py [--dot-cap SECONDS]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxviz.view.dot import to_dot  # noqa: E402
from jaxviz.view.html import render_html  # noqa: E402
from tools.synth import FakeTrace, flat_graph, nested_graph  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CASES = [("1k flat", lambda: flat_graph(1_000)), ("5k flat", lambda: flat_graph(5_000)),
         ("20k flat", lambda: flat_graph(20_000)), ("100k nested", lambda: nested_graph(100_000))]

EXPAND_JS = """() => {
  const j = document.querySelector('.jv-root').jaxviz;
  // the collapsed cluster on screen that opens the most (a fold, a group, a jit body)
  const cand = j.boxes().filter(b => b.kind !== 'node' || /^(pjit|scan|cond|while|closed_call)/.test(b.label));
  if (!cand.length) return null;
  const key = cand.sort((a, b) => (parseFloat(b.sub) || 0) - (parseFloat(a.sub) || 0))[0].key;
  const out = [];
  for (let i = 0; i < 5; i++) { const open = j.toggle(key); const close = j.toggle(key); out.push([open, close]); }
  j.toggle(key);
  const shown = +document.querySelector('.jv-root').dataset.visible;
  const all = j.expandAll();
  return {key, out, shown, all, allShown: +document.querySelector('.jv-root').dataset.visible};
}"""


def time_dot(graph, cap: float) -> tuple[float | None, str]:
    """Seconds Graphviz `dot -Tsvg` takes to lay out the graph, and the dot column's text.

    The seconds are None when there is no time to compare: `dot` is missing, ran past `cap`,
    or failed (a non-zero exit, or a signal: dot 2.43 segfaults on some 20k-node graphs);
    the text says which. A comparison tool's failure is a result, never the end of the bench.
    """
    if shutil.which("dot") is None:
        return None, "n/a"
    src = to_dot(graph, max_depth=64, max_nodes=10**9).source
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(["dot", "-Tsvg", "-o", os.devnull], input=src.encode(), timeout=cap,
                              capture_output=True)
    except subprocess.TimeoutExpired:
        return None, f">{cap:.0f}s"
    except OSError as e:
        return None, f"dot failed ({e.strerror or type(e).__name__})"
    dt = time.perf_counter() - t0
    if proc.returncode < 0:
        try:
            sig = signal.Signals(-proc.returncode).name
        except ValueError:
            sig = f"signal {-proc.returncode}"
        return None, f"dot crashed ({sig})"
    if proc.returncode > 0:
        return None, f"dot failed (exit {proc.returncode})"
    return dt, f"{dt:.2f}s"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dot-cap", type=float, default=60.0, help="seconds before dot is stopped")
    args = ap.parse_args()
    if not os.access(CHROMIUM, os.X_OK):
        print(f"skipped: {CHROMIUM} is missing (make chromium)")
        return 0
    from playwright.sync_api import sync_playwright
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="jaxviz-bench-"))
    print(f"{'graph':12s} {'eqns':>7s} {'html':>8s} {'paint':>8s} {'expand':>8s} {'collapse':>8s} "
          f"{'shown':>6s} {'expand-all':>14s} {'dot':>22s} {'dot/paint':>9s}")
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(tmp / "profile"), executable_path=CHROMIUM,
                                                   headless=True, args=ARGS,
                                                   viewport={"width": 1280, "height": 860})
        for name, make in CASES:
            g = make()
            page_path = tmp / f"{name.replace(' ', '_')}.html"
            page_path.write_text(render_html([FakeTrace(g)], title=name))
            paints = []
            for _ in range(3):
                page = ctx.new_page()
                page.goto(page_path.as_uri())
                page.wait_for_selector(".jv-root[data-painted='1']", timeout=60_000)
                paints.append(page.evaluate(
                    "() => document.querySelector('.jv-root').jaxviz.timings.firstPaintAt") / 1000)
                if len(paints) < 3:
                    page.close()
            r = page.evaluate(EXPAND_JS)
            page.close()
            opens = [o for o, _ in r["out"]] if r else [float("nan")]
            closes = [c for _, c in r["out"]] if r else [float("nan")]
            paint = statistics.median(paints)
            dot, dot_s = time_dot(g, args.dot_cap)
            ratio = (f"{dot / paint:.1f}x" if dot is not None else
                     f">{args.dot_cap / paint:.0f}x" if dot_s.startswith(">") else "n/a")
            print(f"{name:12s} {g.n_eqns:7d} {page_path.stat().st_size / 1e6:7.2f}M {paint:7.3f}s "
                  f"{statistics.median(opens):6.0f}ms {statistics.median(closes):6.0f}ms "
                  f"{r['shown'] if r else 0:6d} {r['all'] if r else 0:6.0f}ms/{r['allShown'] if r else 0:5d} "
                  f"{dot_s:>22s} {ratio:>9s}", flush=True)
        ctx.close()
    shutil.rmtree(tmp, ignore_errors=True)
    print("targets: paint <= 1 s; expand/collapse <= 300 ms (20k flat, 100k nested); "
          "dot/paint = how many times longer Graphviz takes to lay out the same graph")
    return 0


if __name__ == "__main__":
    sys.exit(main())
