/**
 * @module test/support/dockerfile
 * Reads a Dockerfile into stages of instructions, enough for the packaging
 * test to check that the images build exactly the tree it assembles and
 * start it the way it starts it: line continuations, comments, ARG defaults
 * substituted into FROM, JSON (exec) and shell forms.
 */
import { readFile } from 'node:fs/promises';

export interface Instruction {
  /** Upper-case keyword: FROM, RUN, COPY, ... */
  readonly keyword: string;
  /** Everything after the keyword, continuation lines joined with a space. */
  readonly args: string;
  /** 1-based line where the instruction starts. */
  readonly line: number;
}

export interface Stage {
  /** The image after FROM, with ARG defaults substituted. */
  readonly base: string;
  readonly name: string | undefined;
  readonly instructions: readonly Instruction[];
}

export interface Dockerfile {
  /** ARGs declared before the first FROM, with their defaults. */
  readonly globalArgs: ReadonlyMap<string, string>;
  readonly stages: readonly Stage[];
}

export function parseInstructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let raw = lines[i]!;
    if (/^\s*(#|$)/.test(raw)) continue;
    // A trailing backslash continues the instruction; comment lines inside it are dropped.
    while (/\\\s*$/.test(raw) && i + 1 < lines.length) {
      i++;
      const next = lines[i]!;
      raw = raw.replace(/\\\s*$/, ' ') + (/^\s*#/.test(next) ? '' : next);
    }
    const m = /^\s*([A-Za-z]+)\s+([\s\S]*)$/.exec(raw);
    if (!m) throw new Error(`Dockerfile line ${start + 1}: cannot read '${raw}'`);
    out.push({ keyword: m[1]!.toUpperCase(), args: m[2]!.replace(/\s+/g, ' ').trim(), line: start + 1 });
  }
  return out;
}

function substitute(text: string, args: ReadonlyMap<string, string>): string {
  return text.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (whole, a: string | undefined, b: string | undefined) => args.get(a ?? b ?? '') ?? whole,
  );
}

export function parseDockerfile(text: string): Dockerfile {
  const globalArgs = new Map<string, string>();
  const stages: { base: string; name: string | undefined; instructions: Instruction[] }[] = [];
  for (const ins of parseInstructions(text)) {
    if (ins.keyword === 'FROM') {
      const parts = ins.args.split(' ').filter((p) => !p.startsWith('--'));
      const as = parts.findIndex((p) => p.toUpperCase() === 'AS');
      stages.push({ base: substitute(parts[0] ?? '', globalArgs), name: as === -1 ? undefined : parts[as + 1], instructions: [] });
      continue;
    }
    const stage = stages[stages.length - 1];
    if (!stage) {
      if (ins.keyword !== 'ARG') throw new Error(`Dockerfile line ${ins.line}: ${ins.keyword} before the first FROM`);
      const [name, value] = ins.args.split('=', 2) as [string, string | undefined];
      globalArgs.set(name.trim(), (value ?? '').trim());
      continue;
    }
    stage.instructions.push(ins);
  }
  return { globalArgs, stages };
}

export async function readDockerfile(file: string): Promise<Dockerfile> {
  return parseDockerfile(await readFile(file, 'utf8'));
}

/** An exec-form (JSON array) argument list, or undefined for the shell form. */
export function execForm(args: string): string[] | undefined {
  if (!args.startsWith('[')) return undefined;
  const parsed = JSON.parse(args) as unknown;
  if (!Array.isArray(parsed) || !parsed.every((x) => typeof x === 'string')) throw new Error(`not an exec-form list: ${args}`);
  return parsed as string[];
}

/** `KEY=value` pairs of ENV and LABEL instructions (double-quoted values allowed). */
export function keyValues(args: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of args.matchAll(/([A-Za-z0-9_.-]+)=("(?:[^"\\]|\\.)*"|\S+)/g)) {
    const v = m[2]!;
    out.set(m[1]!, v.startsWith('"') ? (JSON.parse(v) as string) : v);
  }
  return out;
}

/** COPY sources and destination (options such as --from=stage separated out). */
export function copyParts(args: string): { from: string | undefined; sources: string[]; dest: string } {
  const words = args.split(' ');
  const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
  const paths = words.filter((w) => !w.startsWith('--'));
  return { from, sources: paths.slice(0, -1), dest: paths[paths.length - 1] ?? '' };
}
