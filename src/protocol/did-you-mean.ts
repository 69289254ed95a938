/**
 * @module protocol/did-you-mean
 * The one "did you mean" of the server: every message about an unknown name
 * (a setting, a config.pbtxt field or enum value, a datatype, a log level)
 * suggests the nearest known name, as rustc and TypeScript do, and short
 * closed sets list every valid name. It sits in protocol/, the lowest layer,
 * so that config/, the codecs and the transports all share it.
 */

/** Levenshtein distance (names are short: O(n·m) is nothing). */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}

/** Shorter names tolerate fewer edits: 1 for `fp32`, 3 for `max_batch_sise`, a quarter of a long name. */
function tolerance(name: string): number {
  return Math.max(Math.min(3, Math.floor(name.length / 3)), Math.floor(name.length / 4));
}

/** The known name an unknown one most likely meant, or undefined when none is close. Case never counts against a name (`fp32` → `FP32`). */
export function nearestName(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  const sameButCase = known.find((k) => k.toLowerCase() === lower);
  if (sameButCase !== undefined) return sameButCase;
  // A name that is a prefix of a known one (MME_MEMORY_BUDGET → MME_MEMORY_BUDGET_BYTES) or the other way round;
  // a very short one would be a prefix of too much to mean anything.
  const prefixed = known
    .filter((k) => Math.min(k.length, name.length) >= 4 && (k.toLowerCase().startsWith(lower) || lower.startsWith(k.toLowerCase())))
    .sort((a, b) => Math.abs(a.length - name.length) - Math.abs(b.length - name.length));
  if (prefixed.length > 0) return prefixed[0];
  let best: string | undefined;
  let bestDistance = tolerance(name);
  for (const k of known) {
    const d = distance(lower, k.toLowerCase());
    if (d <= bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return best;
}

/**
 * The tail of a message about an unknown name: `; did you mean 'max_batch_size'?`,
 * followed, when `list` is set, by every valid name: ` (expected one of A, B, C)`.
 * `quote` wraps names the way the message around it does.
 */
export function didYouMean(name: string, known: readonly string[], options: { list?: boolean; quote?: (s: string) => string } = {}): string {
  const quote = options.quote ?? ((s: string) => `'${s}'`);
  const near = nearestName(name, known);
  const hint = near === undefined ? '' : `; did you mean ${quote(near)}?`;
  return options.list ? `${hint} (expected one of ${known.join(', ')})` : hint;
}
