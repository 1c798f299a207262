// The graph view's minimap (bottom right of the canvas): the whole laid-out graph in small,
// with the part the canvas shows outlined. It shows while the graph does not fit the canvas
// at the current zoom (the readable first view of a large graph), smaller in a small canvas,
// none in a tiny one; a click there moves the camera to that spot (input.js binds it).
// Drawing only: camera.js paints it after each frame, so it imports neither the camera nor the state (that would be an import circle).

/** The minimap's largest side (CSS px). */
const SIDE = 160;

/**
 * The minimap's largest side in a cw x ch canvas: SIDE, less in a small canvas (at most 22% of
 * its shorter side, so that it covers a corner, not half the graph), 0 (no minimap) below 48.
 * @param {number} cw
 * @param {number} ch
 */
export function miniSide(cw, ch) {
  const s = Math.min(SIDE, Math.floor(0.22 * Math.min(cw, ch)));
  return s < 48 ? 0 : s;
}

/**
 * The minimap's scale and size for a w x h graph: {s, W, H} (s: minimap px per world px).
 * @param {number} w
 * @param {number} hh
 * @param {number} [side]   its largest side (miniSide)
 * @returns {{s:number, W:number, H:number}}
 */
export function miniScale(w, hh, side = SIDE) {
  const s = Math.min(side / Math.max(w, 1), side / Math.max(hh, 1));
  return { s, W: Math.max(24, Math.ceil(w * s)), H: Math.max(24, Math.ceil(hh * s)) };
}

/**
 * Whether the camera `st` shows the whole w x h graph (then there is no minimap).
 * @param {{tx:number, ty:number, z:number, cw:number, ch:number}} st
 */
export function showsAll(st, w, hh) {
  return st.tx >= -1 && st.ty >= -1 && st.tx + w * st.z <= st.cw + 1 && st.ty + hh * st.z <= st.ch + 1;
}

/**
 * Paints the minimap for the open trace, or hides it when the canvas shows everything.
 * @param {import("./state.js").ViewState} v
 */
export function drawMinimap(v) {
  const { T, st, theme: th } = v;
  const mm = v.dom.minimap;
  const side = miniSide(st.cw, st.ch);
  const all = !T || !T.view || !T.size || !side || showsAll(st, T.size.w, T.size.h);
  mm.hidden = all;
  v.dom.root.dataset.minimap = all ? "0" : "1";
  if (all) return;
  const { s, W, H } = miniScale(T.size.w, T.size.h, side);
  const dpr = st.dpr;
  if (mm.width !== Math.round(W * dpr) || mm.height !== Math.round(H * dpr)) {
    mm.width = Math.round(W * dpr); mm.height = Math.round(H * dpr);
    mm.style.width = W + "px"; mm.style.height = H + "px";
  }
  v.mini = { s, W, H };
  const ctx = mm.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = th.bg;
  ctx.fillRect(0, 0, W, H);
  ctx.fillStyle = th.frame;
  for (const f of T.view.frames) ctx.fillRect(f.x * s, f.y * s, f.w * s, f.h * s);
  ctx.fillStyle = th.edge;
  const boxes = T.view.boxes;
  for (let i = 0; i < boxes.length && i < 20000; i++) {
    const b = boxes[i];
    ctx.fillRect(b.x * s, b.y * s, Math.max(1, b.w * s), Math.max(1, b.h * s));
  }
  // what the canvas shows, clipped to the map (a canvas wider than the graph would draw its
  // sides off the map), shaded and outlined
  const r = v.mini.rect = screenRect(st, s, W, H);
  ctx.globalAlpha = 0.18;
  ctx.fillStyle = th.brand;
  ctx.fillRect(r.x, r.y, r.w, r.h);
  ctx.globalAlpha = 1;
  ctx.strokeStyle = th.brand;
  ctx.lineWidth = 2;
  ctx.strokeRect(r.x + 1, r.y + 1, Math.max(0, r.w - 2), Math.max(0, r.h - 2));
}

/**
 * The part of the graph on screen, in minimap px, clipped to the W x H map.
 * @param {{tx:number, ty:number, z:number, cw:number, ch:number}} st
 * @param {number} s   minimap px per world px
 * @param {number} W
 * @param {number} H
 * @returns {{x:number, y:number, w:number, h:number}}
 */
export function screenRect(st, s, W, H) {
  const x0 = Math.max(0, (-st.tx / st.z) * s), y0 = Math.max(0, (-st.ty / st.z) * s);
  const x1 = Math.min(W, ((st.cw - st.tx) / st.z) * s), y1 = Math.min(H, ((st.ch - st.ty) / st.z) * s);
  // at least MIN_MARK px a side (a close zoom on a large graph is a dot otherwise), kept in the map
  const grow = (a, b, max) => {
    if (b - a >= MIN_MARK || max < MIN_MARK) return [a, Math.max(a, b)];
    const c = Math.min(Math.max((a + b) / 2, MIN_MARK / 2), max - MIN_MARK / 2);
    return [c - MIN_MARK / 2, c + MIN_MARK / 2];
  };
  const [xa, xb] = grow(x0, x1, W), [ya, yb] = grow(y0, y1, H);
  return { x: xa, y: ya, w: xb - xa, h: yb - ya };
}

/** The least side of the minimap's on-screen mark (CSS px). */
const MIN_MARK = 8;
