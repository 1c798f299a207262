"""First paint of a saved 20k-equation page (issue 57 item 13), in headless Chromium.

`jaxviz.save_html` of a real flat trace (a jitted loop of 10k sin * c: 20,000 equations in one
body, the page ~0.4 MB now, 1.8 MB before) is opened again and again, and the time from
navigation start to the graph's first canvas frame (`timings.firstPaintAt`) is read. Beside it,
in the same browser and alternating with it, the same page as it was written before: with the
whole text twin (20,002 lines, 1.4 MB) in the <pre> shown until the view starts, which
Chromium parsed and laid out before the view's script ran. The machine may be loaded: the
ratio of the two medians, measured in the same run, is the figure to read.

    python bench/bench_first_paint.py [--loads N]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TARGET_S = 1.0


def flat_trace(n_iters: int = 10_000):
    import jax
    import jax.numpy as jnp

    import jaxviz

    def flat(x):
        for _ in range(n_iters):
            x = jnp.sin(x) * 1.0001
        return x

    return jaxviz.trace(jax.jit(flat), jnp.ones(8))


def pages(tmp: pathlib.Path) -> dict[str, pathlib.Path]:
    """The saved page now, and as it was with the whole text twin in it."""
    import jaxviz
    from jaxviz.view import html

    t0 = time.perf_counter()
    t = flat_trace()
    print(f"traced {t.graph.n_eqns} equations in {time.perf_counter() - t0:.1f} s", flush=True)
    out = {"now": tmp / "now.html", "whole text": tmp / "whole_text.html"}
    jaxviz.save_html(t, out["now"])
    keep = html.FALLBACK_LINES
    html.FALLBACK_LINES = 10**9
    try:
        jaxviz.save_html(t, out["whole text"])
    finally:
        html.FALLBACK_LINES = keep
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--loads", type=int, default=7, help="loads of each page (alternating)")
    args = ap.parse_args()
    if not os.access(CHROMIUM, os.X_OK):
        print(f"skipped: {CHROMIUM} is missing (make chromium)")
        return 0
    from playwright.sync_api import sync_playwright

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="jaxviz-bench-paint-"))
    paths = pages(tmp)
    got: dict[str, list[float]] = {k: [] for k in paths}
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(tmp / "profile"), executable_path=CHROMIUM, headless=True, args=ARGS,
            viewport={"width": 1400, "height": 900})
        for _ in range(args.loads):
            for name, path in paths.items():
                page = ctx.new_page()
                page.goto(path.as_uri())
                page.wait_for_selector(".jv-root[data-painted='1']", timeout=60_000)
                got[name].append(page.evaluate(
                    "() => document.querySelector('.jv-root').jaxviz.timings.firstPaintAt") / 1000)
                page.close()
        ctx.close()
    med = {k: statistics.median(v) for k, v in got.items()}
    for name, path in paths.items():
        print(f"{name:11s} {path.stat().st_size / 1e6:5.2f} MB  "
              f"first paint median {med[name]:.3f} s  (min {min(got[name]):.3f}, "
              f"max {max(got[name]):.3f}, {len(got[name])} loads)")
    met = "met" if med["now"] <= TARGET_S else "NOT met"
    print(f"now / whole text: {med['now'] / med['whole text']:.2f}x; target: now <= "
          f"{TARGET_S:.0f} s ({met} on this machine, {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
