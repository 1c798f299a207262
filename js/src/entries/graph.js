// jaxviz's interactive jaxpr graph: an anywidget view (also mounted by the offline HTML page
// through a small model shim). Model traits: `payload` (see graph/model.js typedefs) and
// `selected` ({trace, body, node}, written back when a node is clicked); `live_token` keys
// the view's remembered tab. The view's parts live in graph/: dom.js (elements, CSS),
// state.js (the state object and its transitions), traces.js (payload, tabs, diagnostics),
// toolbar.js, search.js, camera.js, minimap.js, input.js (pointer, keyboard, minimap),
// host.js (theme, size, model traits), hooks.js (root.jaxviz for tests).

import { injectCss, mountView } from "../graph/dom.js";
import { createState, dispose } from "../graph/state.js";
import { bindToolbar } from "../graph/toolbar.js";
import { bindSearch } from "../graph/search.js";
import { bindPointer, bindKeyboard, bindMinimap } from "../graph/input.js";
import { watchTheme, watchSize, watchModel, watchFindings } from "../graph/host.js";
import { installHooks } from "../graph/hooks.js";
import { resize } from "../graph/camera.js";
import { load } from "../graph/traces.js";
import { openCompare } from "../graph/compareview.js";

/** Mounts a graph view of `model` in `el`; returns its cleanup. */
function render({ model, el }) {
  const t0 = performance.now();
  injectCss();
  const v = createState(model, el, mountView(el), t0);
  v.openCompare = openCompare;   // a recompile's "compare" button
  bindSearch(v);
  bindToolbar(v);
  bindPointer(v);
  bindKeyboard(v);
  bindMinimap(v);
  watchTheme(v);
  watchSize(v);
  watchModel(v);
  watchFindings(v);
  installHooks(v);
  resize(v);
  load(v);
  return () => dispose(v);
}

/** On model creation (displayed or not): lets HTML views of the page find this live model. */
function initialize({ model }) {
  const reg = (window.__jaxvizLive = window.__jaxvizLive || {});
  let tok = "";
  const link = () => {
    if (tok && reg[tok] === model) delete reg[tok];
    tok = model.get("live_token") || "";
    if (tok) reg[tok] = model;
  };
  link();
  model.on("change:live_token", link);
  return () => { model.off("change:live_token", link); if (tok && reg[tok] === model) delete reg[tok]; };
}

export default { initialize, render };
