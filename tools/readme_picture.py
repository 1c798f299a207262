"""Makes docs/jaxviz.png: a real cell's view, captured in headless Chromium (Debian's)."""
import pathlib
import tempfile

import jaxviz

CELL = '''
import jax, jax.numpy as jnp
def layernorm(x):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
def block(x, w1, w2):
    return x + jax.nn.gelu(layernorm(x) @ w1) @ w2
@jax.jit
def model(x, ws):
    for w1, w2 in ws:
        x = block(x, w1, w2)
    return (x ** 2).mean()
ws = [(jnp.ones((64, 256)) * 0.01, jnp.ones((256, 64)) * 0.01)] * 6
loss = model(jnp.ones((16, 64)), ws)
'''


def main(out="docs/jaxviz.png"):
    from playwright.sync_api import sync_playwright
    ct = jaxviz.trace_cell(CELL, filename="<cell 4>")
    page_path = pathlib.Path(tempfile.mkdtemp()) / "view.html"
    jaxviz.save_html(ct, page_path)
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            tempfile.mkdtemp(), executable_path="/usr/bin/chromium", headless=True,
            viewport={"width": 1200, "height": 720},
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        page = ctx.new_page()
        page.goto(page_path.as_uri())
        page.wait_for_selector(".jv-root[data-painted='1']", timeout=30_000)
        boxes = page.evaluate("() => document.querySelector('.jv-root').jaxviz.boxes()")
        group = next((b for b in boxes if b["kind"] != "node" and b["onScreen"]
                      and "block" in str(b.get("label", ""))), None)
        if group:
            page.mouse.dblclick(group["cx"], group["cy"])
            page.wait_for_timeout(300)
        boxes = page.evaluate("() => document.querySelector('.jv-root').jaxviz.boxes()")
        eqn = next((b for b in boxes if b.get("nodeKind") == "eqn" and b["onScreen"]), None)
        if eqn:
            page.mouse.click(eqn["cx"], eqn["cy"])
            page.wait_for_timeout(300)
        page.screenshot(path=out)
        ctx.close()
    print("wrote", out)


if __name__ == "__main__":
    main()
