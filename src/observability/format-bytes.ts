/**
 * @module observability/format-bytes
 * Byte counts for people (`1.50 GiB`, `512 MiB`): the start-up summary and the
 * CLI's reports. Log fields keep raw byte counts; this is for the text around them.
 */
const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return 'unbounded';
  let v = bytes;
  let i = 0;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${bytes} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${UNITS[i]}`;
}
