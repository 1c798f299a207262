// The notebook's editor, from inside an output: a finding's cell line puts the cursor on that
// line (JupyterLab 4 and Notebook 7 edit cells with CodeMirror 6, whose content element
// carries its view). Only a page that is a notebook has one: a saved HTML page has no editor.

/**
 * The cell number of a file label as jaxviz prints it (`cell [3]`), else null.
 * @param {string} filename
 * @returns {number|null}
 */
export function cellNumber(filename) {
  const m = /^cell \[(\d+)\]$/.exec(filename || "");
  return m ? Number(m[1]) : null;
}

/**
 * The CodeMirror content element of the cell `filename` names, in the notebook holding `el`:
 * the cell whose prompt reads `[n]:`, else (a `<cell ...>` name, the cell still running) the
 * cell holding `el` itself; null outside a notebook.
 * @param {HTMLElement} el
 * @param {string} filename
 * @returns {HTMLElement|null}
 */
export function cellEditor(el, filename) {
  const own = el.closest(".jp-CodeCell");
  const nb = el.closest(".jp-Notebook");
  if (!own || !nb) return null;
  const n = cellNumber(filename);
  if (n != null) {
    for (const c of nb.querySelectorAll(".jp-CodeCell")) {
      const p = c.querySelector(".jp-InputPrompt");
      if (p && p.textContent.replace(/\s/g, "") === `[${n}]:`) return c.querySelector(".cm-content");
    }
  }
  return n == null && /^<cell/.test(filename || "") ? own.querySelector(".cm-content") : null;
}

/**
 * CodeMirror 6's EditorView of a content element, as its EditorView.findFromDOM reads it:
 * the element's tile (`cmTile`, JupyterLab 4.6; `cmView` before) and its root's view.
 * @param {any} content
 */
export function editorView(content) {
  const cv = content && (content.cmTile || content.cmView);
  if (!cv) return null;
  return (cv.root && cv.root.view) || (cv.rootView && cv.rootView.view) || cv.view || null;
}

/**
 * Whether `el` sits in a notebook whose editor can be reached (the line links are offered then).
 * @param {HTMLElement} el
 */
export function inNotebook(el) {
  return !!(el.closest(".jp-Notebook") && el.closest(".jp-CodeCell"));
}

/**
 * Puts the cursor on line `line` of the cell `filename` names, scrolled into view and focused.
 * Returns whether it could.
 * @param {HTMLElement} el      an element of the output (the view's root)
 * @param {string} filename     the finding's file, as the payload labels it (`cell [3]`)
 * @param {number} line         the line as the editor numbers it
 * @returns {boolean}
 */
export function goToLine(el, filename, line) {
  const view = editorView(cellEditor(el, filename));
  if (!view || line == null) return false;
  const doc = view.state.doc;
  const at = doc.line(Math.max(1, Math.min(doc.lines, line)));
  view.focus();
  view.dispatch({ selection: { anchor: at.from, head: at.to }, scrollIntoView: true });
  return true;
}
