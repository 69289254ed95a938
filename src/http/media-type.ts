/**
 * @module http/media-type
 * Content-Type and Accept as RFC 9110 defines them: `type/subtype` plus
 * `;name=value` parameters (names case-insensitive, values possibly quoted),
 * and Accept's comma-separated media ranges with `q` weights. Negotiation
 * picks the offer with the highest weight, the most specific matching range
 * deciding each offer's weight, and the server's order breaking ties.
 */

export interface MediaType {
  /** Lower-cased `type/subtype` (may be `*` in Accept ranges). */
  readonly type: string;
  /** Lower-cased parameter names → values (unquoted). */
  readonly params: ReadonlyMap<string, string>;
}

const TOKEN = /^[a-z0-9!#$%&'*+.^_`|~-]+$/;

/** Split on `sep` outside double quotes. */
function splitOutsideQuotes(value: string, sep: string): string[] {
  const out: string[] = [];
  let quoted = false;
  let start = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (c === '"' && value[i - 1] !== '\\') quoted = !quoted;
    else if (c === sep && !quoted) {
      out.push(value.slice(start, i));
      start = i + 1;
    }
  }
  out.push(value.slice(start));
  return out;
}

/**
 * Parsed values of recent header strings. Every inference request parses
 * its Content-Type (twice: for the body layout and for the format) and
 * clients send the same few strings over and over, so a small table saves
 * the splitting and regex work per request. Entries are frozen values; the
 * table is emptied when full, so it stays bounded whatever clients send.
 */
const MEMO_LIMIT = 256;
const MEMO_MAX_LENGTH = 256;
const memo = new Map<string, MediaType | undefined>();

/** Parse one media type (or Accept range); undefined when malformed. */
export function parseMediaType(value: string): MediaType | undefined {
  if (value.length > MEMO_MAX_LENGTH) return parseUncached(value);
  const hit = memo.get(value);
  if (hit !== undefined || memo.has(value)) return hit;
  const parsed = parseUncached(value);
  if (memo.size >= MEMO_LIMIT) memo.clear();
  memo.set(value, parsed);
  return parsed;
}

function parseUncached(value: string): MediaType | undefined {
  const [head = '', ...rest] = splitOutsideQuotes(value, ';');
  const type = head.trim().toLowerCase();
  const slash = type.indexOf('/');
  if (slash <= 0 || !TOKEN.test(type.slice(0, slash)) || !TOKEN.test(type.slice(slash + 1))) return undefined;
  const params = new Map<string, string>();
  for (const p of rest) {
    if (p.trim() === '') continue;
    const eq = p.indexOf('=');
    if (eq <= 0) return undefined;
    const name = p.slice(0, eq).trim().toLowerCase();
    let v = p.slice(eq + 1).trim();
    if (v.length >= 2 && v.startsWith('"') && v.endsWith('"')) v = v.slice(1, -1).replace(/\\(.)/g, '$1');
    if (!TOKEN.test(name)) return undefined;
    params.set(name, v);
  }
  return Object.freeze({ type, params });
}

interface AcceptRange {
  readonly type: string;
  readonly q: number;
}

/** The ranges of an Accept header; malformed entries are ignored, as clients send odd things. */
export function parseAccept(header: string): AcceptRange[] {
  const out: AcceptRange[] = [];
  for (const part of splitOutsideQuotes(header, ',')) {
    if (part.trim() === '') continue;
    const m = parseMediaType(part);
    if (!m) continue;
    const qRaw = m.params.get('q');
    const q = qRaw === undefined ? 1 : /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/.test(qRaw) ? Number(qRaw) : 1;
    out.push({ type: m.type, q });
  }
  return out;
}

/** How specifically `range` matches `offer`: 3 exact, 2 `type/*`, 1 `*\/*`, 0 no match. */
function specificity(range: string, offer: string): number {
  if (range === offer) return 3;
  if (range === '*/*') return 1;
  const [rt, rs] = range.split('/');
  const [ot] = offer.split('/');
  return rs === '*' && rt === ot ? 2 : 0;
}

/**
 * The offer the client prefers, or undefined when it accepts none of them.
 * `aliases` map a range the client may send to the offer it means.
 * A missing or empty Accept header accepts the first offer.
 */
export function negotiate(accept: string | undefined, offers: readonly string[], aliases: Readonly<Record<string, string>> = {}): string | undefined {
  if (accept === undefined || accept.trim() === '') return offers[0];
  const ranges = parseAccept(accept).map((r) => ({ ...r, type: aliases[r.type] ?? r.type }));
  if (ranges.length === 0) return offers[0];
  let best: string | undefined;
  let bestQ = 0;
  for (const offer of offers) {
    let spec = 0;
    let q = 0;
    for (const r of ranges) {
      const s = specificity(r.type, offer);
      if (s > spec || (s === spec && s > 0 && r.q > q)) {
        spec = s;
        q = r.q;
      }
    }
    if (spec > 0 && q > bestQ) {
      best = offer;
      bestQ = q;
    }
  }
  return best;
}
