// Bundles each js/src/entries/NAME.js into jaxviz/static/NAME.js: one self-contained ESM
// file per widget (anywidget loads it from a Blob URL, so nothing may be imported at runtime).
import { build } from "esbuild";
import { readdirSync } from "node:fs";

const entries = readdirSync("src/entries").filter((f) => f.endsWith(".js"));
await build({
  entryPoints: entries.map((f) => `src/entries/${f}`),
  outdir: "../jaxviz/static",
  bundle: true,
  format: "esm",
  minify: true,
  target: ["es2020"],
  legalComments: "none",
  logLevel: "warning",
});
