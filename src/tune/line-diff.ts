/**
 * @module tune/line-diff
 * A unified diff of two small texts (config.pbtxt files: tens of lines), by
 * longest common subsequence over lines, with three lines of context, in
 * the format `patch` and code review tools read.
 */

export function unifiedDiff(before: string, after: string, fromName: string, toName: string): string {
  const a = before.split('\n');
  const b = after.split('\n');
  if (a[a.length - 1] === '') a.pop();
  if (b[b.length - 1] === '') b.pop();
  const n = a.length;
  const m = b.length;
  // lcs[i][j]: length of the LCS of a[i..] and b[j..].
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--) lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  type Op = { kind: ' ' | '-' | '+'; text: string };
  const ops: Op[] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      ops.push({ kind: ' ', text: a[i++]! });
      j++;
    } else if (i < n && (j >= m || lcs[i + 1]![j]! >= lcs[i]![j + 1]!)) ops.push({ kind: '-', text: a[i++]! });
    else ops.push({ kind: '+', text: b[j++]! });
  }
  if (ops.every((o) => o.kind === ' ')) return '';
  const CONTEXT = 3;
  const out = [`--- ${fromName}`, `+++ ${toName}`];
  const changed = ops.flatMap((o, k) => (o.kind === ' ' ? [] : [k]));
  // Changes closer than two contexts share a hunk.
  const groups: number[][] = [];
  for (const k of changed) {
    const g = groups[groups.length - 1];
    if (g !== undefined && k - g[g.length - 1]! <= 2 * CONTEXT) g.push(k);
    else groups.push([k]);
  }
  for (const g of groups) {
    const from = Math.max(0, g[0]! - CONTEXT);
    const to = Math.min(ops.length, g[g.length - 1]! + CONTEXT + 1);
    const hunk = ops.slice(from, to);
    const aStart = countBefore(ops, from, '+') + 1;
    const bStart = countBefore(ops, from, '-') + 1;
    const aLen = hunk.filter((o) => o.kind !== '+').length;
    const bLen = hunk.filter((o) => o.kind !== '-').length;
    out.push(`@@ -${aLen === 0 ? aStart - 1 : aStart},${aLen} +${bLen === 0 ? bStart - 1 : bStart},${bLen} @@`);
    for (const o of hunk) out.push(`${o.kind}${o.text}`);
  }
  return `${out.join('\n')}\n`;
}

/** Lines of the old (skip '+') or new (skip '-') text before op index `upTo`. */
function countBefore(ops: readonly { kind: string }[], upTo: number, skip: '+' | '-'): number {
  let c = 0;
  for (let i = 0; i < upTo; i++) if (ops[i]!.kind !== skip) c++;
  return c;
}
