/**
 * A small reader of the Markdown this repository writes: headings with the
 * anchors GitHub gives them, relative links, and fenced code blocks. The docs
 * tests use it so that a moved section, a renamed file or a command that no
 * longer works fails a test instead of a reader.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** Folders that hold no documentation of ours (generated, installed or copied). */
const SKIPPED_DIRS = new Set(['node_modules', 'dist', '.git', '.cache', 'results', 'repository', 'out']);

/** Every *.md file of the repository, relative to `root`, sorted. */
export function markdownFiles(root: string): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = dir === '' ? entry.name : `${dir}/${entry.name}`;
      if (entry.isDirectory()) {
        if (!SKIPPED_DIRS.has(entry.name)) walk(rel);
      } else if (entry.isFile() && entry.name.endsWith('.md')) found.push(rel);
    }
  };
  walk('');
  return found.sort();
}

export interface CodeBlock {
  /** The info string after the opening fence (`sh`, `bash`, ...). */
  readonly lang: string;
  readonly text: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
}

interface Line {
  readonly text: string;
  readonly no: number;
  readonly inFence: boolean;
}

function lines(markdown: string): Line[] {
  const out: Line[] = [];
  let fence: string | undefined;
  markdown.split('\n').forEach((text, i) => {
    const m = /^\s{0,3}(`{3,}|~{3,})/.exec(text);
    if (fence === undefined && m) {
      fence = m[1]![0]!.repeat(m[1]!.length);
      out.push({ text, no: i + 1, inFence: true });
    } else if (fence !== undefined) {
      out.push({ text, no: i + 1, inFence: true });
      if (m && m[1]!.startsWith(fence) && text.trim().replace(/[`~]/g, '') === '') fence = undefined;
    } else out.push({ text, no: i + 1, inFence: false });
  });
  return out;
}

/** Fenced code blocks, in order. */
export function codeBlocks(markdown: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  let current: { lang: string; body: string[]; line: number } | undefined;
  let fence = '';
  for (const [i, text] of markdown.split('\n').entries()) {
    const m = /^\s{0,3}(`{3,}|~{3,})\s*([^\s`]*)/.exec(text);
    if (current === undefined) {
      if (m) {
        fence = m[1]!;
        current = { lang: m[2] ?? '', body: [], line: i + 1 };
      }
    } else if (m && m[1]!.startsWith(fence) && text.trim().replace(/[`~]/g, '') === '') {
      blocks.push({ lang: current.lang, text: current.body.join('\n'), line: current.line });
      current = undefined;
    } else current.body.push(text);
  }
  return blocks;
}

/** The text GitHub renders for a heading's inline Markdown (what its anchor is made from). */
function renderedText(inline: string): string {
  return inline
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/`+([^`]*)`+/g, '$1')
    .replace(/(\*\*|__)(.*?)\1/g, '$2')
    .replace(/(\*|_)(.*?)\1/g, '$2');
}

/**
 * GitHub's anchor for a heading: lower case, every character that is not a
 * letter, a digit, a space, `-` or `_` removed, spaces turned into `-`
 * (github-slugger's rules).
 */
export function githubSlug(heading: string): string {
  return renderedText(heading)
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a Markdown file defines: headings (duplicates numbered as GitHub does) and `<a id|name>`. */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const l of lines(markdown)) {
    if (l.inFence) continue;
    const h = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(l.text);
    if (h) {
      const base = githubSlug(h[1]!);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      out.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of l.text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(m[1]!);
  }
  return out;
}

export interface Link {
  readonly target: string;
  readonly line: number;
}

/** Inline links and images (`[x](target)`) and reference definitions, outside code. */
export function links(markdown: string): Link[] {
  const out: Link[] = [];
  for (const l of lines(markdown)) {
    if (l.inFence) continue;
    const text = l.text.replace(/`[^`]*`/g, '``');
    for (const m of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ target: m[1]!, line: l.no });
    const ref = /^\s{0,3}\[[^\]]+\]:\s*(\S+)/.exec(text);
    if (ref) out.push({ target: ref[1]!, line: l.no });
  }
  return out;
}

/** Problems with the relative links of `file` (relative to `root`): missing files, missing anchors. */
export function brokenLinks(root: string, file: string, read: (rel: string) => string | undefined): string[] {
  const source = read(file);
  if (source === undefined) return [`${file}: cannot be read`];
  const problems: string[] = [];
  for (const { target, line } of links(source)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
    const [rawPath, anchor] = target.split('#', 2) as [string, string | undefined];
    const relPath = decodeURIComponent(rawPath);
    const resolved = relPath === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), relPath));
    if (resolved.startsWith('..')) {
      problems.push(`${file}:${line}: ${target} leaves the repository`);
      continue;
    }
    const content = relPath === '' ? source : read(resolved);
    if (content === undefined) {
      problems.push(`${file}:${line}: ${target}: no such file ${resolved}`);
      continue;
    }
    if (anchor !== undefined && resolved.endsWith('.md') && !anchors(content).has(anchor)) {
      problems.push(`${file}:${line}: ${target}: ${resolved} has no heading with the anchor #${anchor}`);
    }
  }
  return problems;
}

/** `read` for brokenLinks: a file's text, '' for a directory, undefined when absent. */
export function repoReader(root: string): (rel: string) => string | undefined {
  return (rel) => {
    const abs = path.join(root, rel);
    try {
      return readFileSync(abs, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EISDIR') return '';
      return undefined;
    }
  };
}
