// The graph view's DOM: its stylesheet (injected once per page) and the skeleton every part
// of the view fills (toolbar, canvas stage, inspector, memory box, diagnostics list).

import { h } from "./panels.js";
import { toolbar } from "./toolbar.js";

/**
 * Below this width (CSS px) of the view, the inspector sits under the graph instead of beside
 * it (a 1000 px window with JupyterLab's file browser open gives a view about 600 px wide).
 */
export const NARROW_PX = 760;

const CSS = `
.jv-root{--jv-bg:var(--jp-layout-color0,#fff);--jv-fg:var(--jp-ui-font-color0,#1f2328);--jv-fg2:var(--jp-ui-font-color2,#57606a);
--jv-border:var(--jp-border-color1,#c9ced6);--jv-panel:var(--jp-layout-color1,#f6f8fa);--jv-brand:var(--jp-brand-color1,#1976d2);
display:flex;flex-direction:column;height:560px;min-height:240px;resize:vertical;overflow:hidden;border:1px solid var(--jv-border);
border-radius:4px;background:var(--jv-bg);color:var(--jv-fg);font:12px var(--jp-ui-font-family,system-ui,sans-serif);box-sizing:border-box}
@media (prefers-color-scheme:dark){.jv-root:not(.jv-jp){--jv-bg:#1e1e1e;--jv-fg:#e6e6e6;--jv-fg2:#a8b0ba;--jv-border:#4a4f57;--jv-panel:#26282c;--jv-brand:#64b5f6}}
.jv-root *{box-sizing:border-box}
.jv-bar{display:flex;flex-wrap:wrap;gap:6px;align-items:center;padding:4px 6px;border-bottom:1px solid var(--jv-border);background:var(--jv-panel)}
.jv-bar input,.jv-bar select,.jv-btn{font:inherit;color:var(--jv-fg);background:var(--jv-bg);border:1px solid var(--jv-border);border-radius:3px;padding:2px 6px}
.jv-btn{cursor:pointer}.jv-btn:hover{border-color:var(--jv-brand)}
.jv-tab{font:inherit;color:var(--jv-fg);background:transparent;border:none;border-bottom:2px solid transparent;padding:2px 6px;cursor:pointer}
.jv-tab[aria-selected=true]{border-bottom-color:var(--jv-brand);font-weight:600}
.jv-tab-lib{color:var(--jv-fg2)}.jv-tab-part{font-weight:400;color:var(--jv-fg2);font-size:10px}
.jv-tabs{display:flex;flex-wrap:wrap;row-gap:2px;align-items:center;min-width:0;max-width:100%}.jv-tab{white-space:nowrap}
.jv-tab-more{font:inherit;color:var(--jv-fg2);background:transparent;border:none;border-bottom:2px solid transparent;padding:2px 2px;cursor:pointer;max-width:18ch}
.jv-tab-more.jv-open{color:var(--jv-fg);border-bottom-color:var(--jv-brand);font-weight:600}
.jv-name{font-weight:600;padding:2px 6px;max-width:40ch;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.jv-status{margin-left:auto;color:var(--jv-fg2)}
.jv-main{flex:1;display:flex;min-height:0}
.jv-stage{position:relative;flex:1;min-width:0;outline:none}
.jv-stage:focus-visible{box-shadow:inset 0 0 0 2px var(--jv-brand)}
.jv-stage canvas{position:absolute;inset:0;width:100%;height:100%;cursor:grab;touch-action:none}
.jv-insp{width:300px;flex:none;overflow:auto;padding:8px;border-left:1px solid var(--jv-border);background:var(--jv-panel)}
.jv-root:not([data-selected]) .jv-insp,.jv-root[data-selected=""] .jv-insp{display:none}
.jv-root{container-type:inline-size}.jv-cmp .jv-root{container-type:normal}
@container (max-width:${NARROW_PX - 1}px){.jv-main{flex-direction:column}.jv-stage{min-height:140px}
.jv-insp{width:auto;max-height:40%;border-left:none;border-top:1px solid var(--jv-border)}}
.jv-title{font-weight:600;font-size:13px;margin-bottom:6px;word-break:break-all}
.jv-row{display:flex;gap:6px;margin:3px 0}.jv-k{flex:none;width:72px;color:var(--jv-fg2)}.jv-v{flex:1;min-width:0;word-break:break-word}
.jv-list div{white-space:pre-wrap}.jv-mono,.jv-src,.jv-eqn{font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:11px}
.jv-src,.jv-eqn{margin:4px 0;padding:4px;background:var(--jv-bg);border:1px solid var(--jv-border);border-radius:3px;overflow:auto;white-space:pre}
.jv-src-hit{background:rgba(255,200,0,.22)}.jv-ln{color:var(--jv-fg2)}
.jv-muted{color:var(--jv-fg2)}
.jv-tip{position:absolute;pointer-events:none;z-index:2;max-width:420px;padding:4px 6px;border:1px solid var(--jv-border);border-radius:3px;
background:var(--jv-bg);color:var(--jv-fg);white-space:pre;font:11px var(--jp-code-font-family,ui-monospace,monospace);box-shadow:0 1px 4px rgba(0,0,0,.2)}
.jv-diags{flex:none;border-bottom:1px solid var(--jv-border);background:var(--jv-panel);padding:4px 6px}
.jv-diag[hidden]{display:none}.jv-diag-more{margin:2px 0 2px 6px}.jv-diag-order{font-weight:400;color:var(--jv-fg2)}
.jv-diag-line{color:inherit;text-decoration:underline dotted}.jv-diag-line:hover{color:var(--jv-brand)}
.jv-code{font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:11px;padding:0 2px;border-radius:2px;background:var(--jv-bg)}
.jv-diag-head{font-weight:600;margin-bottom:2px}.jv-diag-where{font-weight:400;color:var(--jv-fg2)}
.jv-tab-count{display:inline-block;min-width:16px;margin-left:4px;padding:0 4px;border-radius:8px;font-size:10px;font-weight:600;line-height:15px;
text-align:center;color:#fff;background:var(--jp-warn-color0,#f57c00)}.jv-tab-count.jv-error{background:var(--jp-error-color0,#d32f2f)}
.jv-tab-count.jv-info{background:var(--jv-brand)}
.jv-diag{padding:3px 6px;margin:2px 0;border-left:3px solid var(--jv-border);cursor:pointer}
.jv-diag-msg,.jv-hint,.jv-fix{white-space:pre-wrap}
.jv-fix{font-weight:600}
.jv-hint{font-family:var(--jp-code-font-family,ui-monospace,monospace)}
.jv-diag:hover,.jv-diag:focus{background:var(--jv-bg);outline:none}
.jv-main[hidden],.jv-membox[hidden],.jv-mem-charts[hidden],.jv-mem-head[hidden],.jv-buf-row[hidden]{display:none}
.jv-membox{flex:1;min-height:0;overflow:auto;padding:8px}
.jv-root[data-tab=memory],.jv-root[data-tab=time]{height:auto!important;resize:none}
.jv-root[data-tab=memory] .jv-membox,.jv-root[data-tab=time] .jv-timebox{flex:none;overflow:visible}
.jv-mem-entry{margin-bottom:14px}.jv-mem-ratio{font-weight:600;margin:4px 0}
.jv-mem-table{border-collapse:collapse;margin:6px 0}.jv-root .jv-mem-table th,.jv-root .jv-mem-table td{border:1px solid var(--jv-border);padding:2px 8px;text-align:left;vertical-align:top}
.jv-root .jv-mem-table td.jv-num,.jv-root .jv-buf-table td:first-child,.jv-root .jv-buf-table th:first-child{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
.jv-mem-charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:10px}
.jv-mem-head{margin:0 0 12px;padding:6px 8px;border:1px solid var(--jv-border);border-radius:4px;background:var(--jv-panel)}
.jv-mem-lines{margin:2px 0 4px;padding-left:18px}.jv-mem-line{margin:2px 0}
.jv-buf-tl{display:grid;grid-template-columns:64px 1fr;margin:4px 0}.jv-buf-plot{position:relative}
.jv-buf-y{position:relative;font-size:10px}.jv-buf-y span{position:absolute;right:4px;transform:translateY(-50%);white-space:nowrap}
.jv-buf-x{display:flex;justify-content:space-between;font-size:10px}
.jv-buf-peak{position:absolute;top:0;padding:0 4px;font-size:10px;color:#c0392b;white-space:nowrap}
.jv-buf-toggle{padding:0 4px;line-height:14px}.jv-buf-member td:first-child{padding-left:22px}.jv-buf-fold td{font-weight:600}
.jv-mem-rlabel{font-weight:600}.jv-mem-svg{display:block;width:100%;height:56px;border-bottom:1px solid var(--jv-border)}
.jv-mem-live .jvm{color:var(--jv-fg)}
.jv-root[data-tab=memory] .jv-gt{display:none}
.jv-stage canvas.jv-minimap{position:absolute;inset:auto 6px 6px auto;z-index:1;border:1px solid var(--jv-border);border-radius:3px;cursor:pointer}
.jv-minimap[hidden]{display:none}
.jv-wheel-hint{position:absolute;left:50%;top:40%;transform:translate(-50%,-50%);z-index:3;pointer-events:none;padding:6px 12px;border-radius:4px;
background:rgba(0,0,0,.72);color:#fff;font-size:13px}.jv-wheel-hint[hidden]{display:none}
.jv-legend{position:absolute;left:6px;bottom:6px;z-index:1;max-width:300px;padding:3px 6px;border:1px solid var(--jv-border);border-radius:3px;
background:var(--jv-bg);opacity:.94;font-size:11px}
.jv-legend summary{cursor:pointer;color:var(--jv-fg2)}.jv-legend-title{font-weight:600}
.jv-scale-bar{height:10px;margin:3px 0;border:1px solid var(--jv-border);border-radius:2px}
.jv-scale-ticks{display:flex;justify-content:space-between;gap:8px;color:var(--jv-fg2)}
.jv-mark{display:flex;gap:6px;align-items:center;margin:2px 0}
.jv-sw{flex:none;display:inline-block;width:16px;height:11px;border:2px solid var(--jv-border);border-radius:3px;text-align:center;line-height:8px;font-weight:600}
.jv-sw-weak{border:none;font-family:var(--jp-code-font-family,ui-monospace,monospace)}
.jv-error{border-left-color:var(--jp-error-color0,#d32f2f)}.jv-warning{border-left-color:var(--jp-warn-color0,#f57c00)}.jv-info{border-left-color:var(--jv-brand)}
`;

/** Adds the view's stylesheet to the page (once). */
export function injectCss() {
  if (document.getElementById("jaxviz-graph-css")) return;
  const s = document.createElement("style");
  s.id = "jaxviz-graph-css";
  s.textContent = CSS;
  document.head.appendChild(s);
}

/**
 * @typedef {{root: HTMLElement, bar: HTMLElement, tabs: HTMLElement, q: HTMLInputElement, count: HTMLElement,
 *   colorSel: HTMLSelectElement, status: HTMLElement, buttons: Object<string, HTMLButtonElement>,
 *   canvas: HTMLCanvasElement, tip: HTMLElement, stage: HTMLElement, insp: HTMLElement,
 *   diagBox: HTMLElement, main: HTMLElement, memBox: HTMLElement, legend: HTMLElement,
 *   minimap: HTMLCanvasElement, wheelHint: HTMLElement}} ViewDom
 */

/**
 * Builds the view's elements and puts them in `el` (replacing what it held).
 * @param {HTMLElement} el
 * @returns {ViewDom}
 */
export function mountView(el) {
  const tools = toolbar();
  const canvas = h("canvas");
  const tip = h("div", { className: "jv-tip", hidden: true });
  const legend = h("div", { className: "jv-legend" });
  const minimap = h("canvas", { className: "jv-minimap", hidden: true, title: "the whole graph: click to go there" });
  const wheelHint = h("div", { className: "jv-wheel-hint", hidden: true }, "Ctrl + wheel (⌘ + wheel) zooms; or click the graph first");
  const stage = h("div", { className: "jv-stage", tabIndex: 0, "aria-label": "jaxpr graph" }, canvas, tip, legend, minimap, wheelHint);
  const insp = h("div", { className: "jv-insp" });
  const diagBox = h("div", { className: "jv-diags" });
  const main = h("div", { className: "jv-main" }, stage, insp);
  const memBox = h("div", { className: "jv-membox", hidden: true });
  // the cell's findings first, all of them, above the tabs (each tab marked with its count)
  const root = h("div", { className: "jv-root" }, diagBox, tools.bar, main, memBox);
  if (getComputedStyle(el).getPropertyValue("--jp-layout-color0").trim()) root.classList.add("jv-jp");
  el.replaceChildren(root);
  return { ...tools, root, canvas, tip, stage, insp, diagBox, main, memBox, legend, minimap, wheelHint };
}
