/**
 * @module http/model-path
 * Nested model names on the KServe v2 routes. tritonclient builds its URLs
 * with Python's `quote(model_name)`, which leaves `/` alone, so the target
 * `team/x.tar.gz` arrives as `/v2/models/team/x.tar.gz/infer`; other
 * clients send `team%2Fx.tar.gz`. Both must reach the same model. Before any
 * route is matched, a `/v2/models/...` or `/v2/repository/models/...` path
 * whose name spans several segments is rewritten to its canonical form: the
 * name as one percent-encoded segment, the route's own tail kept
 * (`/versions/{v}`, `/infer`, `/ready`, `/config`, `/stats`, `/load`,
 * `/unload`). The tail is read from the right, as Triton does, so
 * `/v2/models/team/ready` is the readiness of `team`.
 */

const MODEL_TAILS = new Set(['infer', 'ready', 'config', 'stats']);
const REPOSITORY_TAILS = new Set(['load', 'unload']);

/** One segment's decoded value, or undefined when it is not valid percent-encoding. */
function decoded(segment: string): string | undefined {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** `prefix` + the name segments joined into one encoded segment + `tail`; undefined when nothing changes or a segment is invalid. */
function rejoin(prefix: string, name: readonly string[], tail: readonly string[]): string | undefined {
  if (name.length < 2) return undefined;
  const parts: string[] = [];
  for (const s of name) {
    const d = decoded(s);
    if (d === undefined || d === '') return undefined;
    parts.push(d);
  }
  return [prefix + encodeURIComponent(parts.join('/')), ...tail].join('/');
}

/**
 * The canonical path for a v2 model path with a nested name, or undefined
 * when the path is already canonical (or not a model path): the caller then
 * leaves the request as it is.
 */
export function canonicalModelPath(path: string): string | undefined {
  if (path.startsWith('/v2/models/')) {
    const segs = path.slice('/v2/models/'.length).split('/');
    const n = segs.length;
    if (n < 2) return undefined;
    if (n >= 4 && segs[n - 3] === 'versions' && MODEL_TAILS.has(segs[n - 1]!)) return rejoin('/v2/models/', segs.slice(0, n - 3), segs.slice(n - 3));
    if (n >= 3 && segs[n - 2] === 'versions') return rejoin('/v2/models/', segs.slice(0, n - 2), segs.slice(n - 2));
    if (MODEL_TAILS.has(segs[n - 1]!)) return rejoin('/v2/models/', segs.slice(0, n - 1), segs.slice(n - 1));
    return rejoin('/v2/models/', segs, []);
  }
  if (path.startsWith('/v2/repository/models/')) {
    const segs = path.slice('/v2/repository/models/'.length).split('/');
    const n = segs.length;
    if (n < 3 || !REPOSITORY_TAILS.has(segs[n - 1]!)) return undefined;
    return rejoin('/v2/repository/models/', segs.slice(0, n - 1), segs.slice(n - 1));
  }
  return undefined;
}
