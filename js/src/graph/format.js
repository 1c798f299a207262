// Number formatting shared by every widget bundle (esbuild inlines it into each entry).
// Byte counts read the same as on the Python side (jaxviz/format.py's fmt_bytes).

/**
 * Compact number: 1.2k, 3.4M, 5.6G (decimal steps of 1000; "0" for 0 or a missing value).
 * @param {number} x
 * @returns {string}
 */
export function fmt(x) {
  if (!x) return "0";
  const u = ["", "k", "M", "G", "T", "P"];
  let i = 0;
  while (Math.abs(x) >= 1000 && i < u.length - 1) { x /= 1000; i++; }
  return (i === 0 ? String(Math.round(x * 10) / 10) : x.toFixed(x < 10 ? 1 : 0)) + u[i];
}

const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

/**
 * Bytes in binary units: "512 B" below 1024 (no decimals), else one decimal: "1.0 KiB",
 * "3.8 MiB", up to TiB; "unavailable" for null, undefined or a non-finite value (never 0).
 * @param {number|null|undefined} n
 * @returns {string}
 */
export function fmtBytes(n) {
  if (typeof n !== "number" || !Number.isFinite(n)) return "unavailable";
  let u = 0;
  while (Math.abs(n) >= 1024 && u < BYTE_UNITS.length - 1) { n /= 1024; u++; }
  return u === 0 ? `${n.toFixed(0)} B` : `${n.toFixed(1)} ${BYTE_UNITS[u]}`;
}

/** Seconds as the status line says them: `42 ms` below a second, `1.50 s` above (format.py's fmt_seconds). */
export function fmtSeconds(s) {
  return s < 1 ? `${Math.round(s * 1e3)} ms` : `${s.toFixed(2)} s`;
}
