/**
 * @module test/support/mini-yaml
 * A small YAML reader for the repository's own Kubernetes manifests, so a test
 * can check them against the server's real settings without a YAML
 * dependency. It reads the block style those files use: `---` documents,
 * comments, nested mappings and sequences (`- key: value` items included),
 * plain / single- / double-quoted scalars, numbers, booleans, null, and
 * one-line flow collections (`["serve"]`, `{}`). Anything else (anchors, tags,
 * multi-line scalars) is an error rather than a silent misreading.
 */

export type YamlValue = string | number | boolean | null | YamlValue[] | { [key: string]: YamlValue };

interface Line {
  readonly indent: number;
  readonly text: string;
  readonly no: number;
}

function stripComment(raw: string): string {
  let quote: string | undefined;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (quote) {
      if (c === '\\' && quote === '"') i++;
      else if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (c === '#' && (i === 0 || /\s/.test(raw[i - 1]!))) {
      return raw.slice(0, i);
    }
  }
  return raw;
}

function fail(line: Line | undefined, why: string): never {
  throw new Error(`YAML line ${line?.no ?? '?'}: ${why}${line ? ` ('${line.text}')` : ''}`);
}

/** Splits `a, "b, c", [d]` at top-level commas. */
function splitFlow(body: string, line: Line): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quote: string | undefined;
  let start = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (quote) {
      if (c === '\\' && quote === '"') i++;
      else if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '[' || c === '{') depth++;
    else if (c === ']' || c === '}') depth--;
    else if (c === ',' && depth === 0) {
      parts.push(body.slice(start, i));
      start = i + 1;
    }
  }
  if (quote || depth !== 0) fail(line, 'unbalanced flow collection');
  const last = body.slice(start);
  if (last.trim() !== '' || parts.length > 0) parts.push(last);
  return parts.map((p) => p.trim()).filter((p, i, all) => p !== '' || i < all.length - 1);
}

function scalar(text: string, line: Line): YamlValue {
  const t = text.trim();
  if (t === '' || t === '~' || t === 'null') return null;
  if (/^[&*!|>]/.test(t)) fail(line, 'anchors, aliases, tags and block scalars are not supported');
  if (t.startsWith('"')) {
    if (!t.endsWith('"') || t.length < 2) fail(line, 'unterminated double-quoted string');
    return JSON.parse(t) as string;
  }
  if (t.startsWith("'")) {
    if (!t.endsWith("'") || t.length < 2) fail(line, 'unterminated single-quoted string');
    return t.slice(1, -1).replace(/''/g, "'");
  }
  if (t.startsWith('[')) {
    if (!t.endsWith(']')) fail(line, 'unterminated flow sequence');
    return splitFlow(t.slice(1, -1), line).map((p) => scalar(p, line));
  }
  if (t.startsWith('{')) {
    if (!t.endsWith('}')) fail(line, 'unterminated flow mapping');
    const out: Record<string, YamlValue> = {};
    for (const p of splitFlow(t.slice(1, -1), line)) {
      const m = /^([^:]+):\s+(.*)$/.exec(p) ?? fail(line, `bad flow mapping entry '${p}'`);
      out[String(scalar(m[1]!, line))] = scalar(m[2]!, line);
    }
    return out;
  }
  if (t === 'true' || t === 'false') return t === 'true';
  if (/^-?(0|[1-9]\d*)(\.\d+)?$/.test(t)) return Number(t);
  return t;
}

/** `key: rest` at the start of `text` (the key plain or quoted), or undefined. */
function keyOf(text: string): { key: string; rest: string } | undefined {
  const m = /^("(?:[^"\\]|\\.)*"|'[^']*'|[^\s"'#][^:]*?):(?:\s+(.*))?$/.exec(text);
  if (!m) return undefined;
  const raw = m[1]!;
  const key = raw.startsWith('"') ? (JSON.parse(raw) as string) : raw.startsWith("'") ? raw.slice(1, -1) : raw;
  return { key, rest: m[2] ?? '' };
}

class Parser {
  private i = 0;
  /** Our own copy: a `- key: value` item is re-read in place as a mapping line. */
  private readonly lines: Line[];

  constructor(lines: readonly Line[]) {
    this.lines = [...lines];
  }

  parseDocument(): YamlValue {
    if (this.lines.length === 0) return null;
    const value = this.block(this.lines[0]!.indent);
    if (this.i < this.lines.length) fail(this.lines[this.i], 'unexpected indentation');
    return value;
  }

  private block(indent: number): YamlValue {
    const first = this.lines[this.i];
    if (!first || first.indent !== indent) fail(first, `expected indentation ${indent}`);
    return first.text.startsWith('- ') || first.text === '-' ? this.sequence(indent) : this.mapping(indent);
  }

  private sequence(indent: number): YamlValue[] {
    const out: YamlValue[] = [];
    for (let line = this.lines[this.i]; line && line.indent === indent && (line.text.startsWith('- ') || line.text === '-'); line = this.lines[this.i]) {
      const rest = line.text === '-' ? '' : line.text.slice(2).trimStart();
      if (rest === '') {
        this.i++;
        const next = this.lines[this.i];
        out.push(next && next.indent > indent ? this.block(next.indent) : null);
        continue;
      }
      if (rest.startsWith('- ') || rest === '-') {
        // `- - x`: a sequence item that is itself a sequence, starting at the column after "- ".
        const column = indent + (line.text.length - rest.length);
        this.lines[this.i] = { indent: column, text: rest, no: line.no };
        out.push(this.sequence(column));
        continue;
      }
      if (keyOf(rest) && !rest.startsWith('[') && !rest.startsWith('{') && !rest.startsWith('"')) {
        // `- key: value` starts a mapping whose keys sit at the column after "- ".
        const column = indent + (line.text.length - rest.length);
        this.lines[this.i] = { indent: column, text: rest, no: line.no };
        out.push(this.mapping(column));
        continue;
      }
      this.i++;
      out.push(scalar(rest, line));
    }
    return out;
  }

  private mapping(indent: number): Record<string, YamlValue> {
    const out: Record<string, YamlValue> = {};
    for (let line = this.lines[this.i]; line && line.indent === indent; line = this.lines[this.i]) {
      if (line.text.startsWith('- ')) break;
      const kv = keyOf(line.text) ?? fail(line, 'expected `key: value`');
      if (Object.hasOwn(out, kv.key)) fail(line, `duplicate key '${kv.key}'`);
      this.i++;
      if (kv.rest.trim() !== '') {
        out[kv.key] = scalar(kv.rest, line);
        continue;
      }
      const next = this.lines[this.i];
      if (next && (next.indent > indent || (next.indent === indent && next.text.startsWith('- ')))) out[kv.key] = this.block(next.indent);
      else out[kv.key] = null;
    }
    return out;
  }
}

/** Parses every `---`-separated document of `text`. */
export function parseYamlDocuments(text: string): YamlValue[] {
  const docs: Line[][] = [[]];
  text.split('\n').forEach((raw, index) => {
    if (/^---\s*$/.test(raw)) {
      docs.push([]);
      return;
    }
    if (raw.includes('\t')) fail({ indent: 0, text: raw, no: index + 1 }, 'tabs are not allowed in YAML indentation');
    const body = stripComment(raw).replace(/\s+$/, '');
    if (body.trim() === '') return;
    docs[docs.length - 1]!.push({ indent: body.length - body.trimStart().length, text: body.trim(), no: index + 1 });
  });
  return docs.filter((d) => d.length > 0).map((d) => new Parser(d).parseDocument());
}
