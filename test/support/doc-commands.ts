/**
 * @module test/support/doc-commands
 * Runs the shell blocks of our Markdown as a reader would paste them, and
 * checks what each command prints against the `# ...` comment lines written
 * under it. A block takes part when the line before its fence (blank lines
 * aside) is `<!-- doc-test: KIND -->`; KIND says what the block needs (e.g.
 * `demo-server`: the server of `npm start`, on localhost:8080).
 *
 * In an expectation, `...` stands for any text, and an annotation after two or
 * more spaces in parentheses (`#  200   (409 if loaded)`) is ignored.
 */
import { spawn } from 'node:child_process';

export interface DocBlock {
  readonly file: string;
  readonly kind: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly text: string;
}

/** The marked shell blocks of one Markdown file. */
export function markedBlocks(file: string, markdown: string): DocBlock[] {
  const out: DocBlock[] = [];
  const lines = markdown.split('\n');
  let pendingKind: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const marker = /^<!--\s*doc-test:\s*([\w+-]+)\s*-->\s*$/.exec(line);
    if (marker) {
      pendingKind = marker[1];
      continue;
    }
    const fence = /^(`{3,})\s*(\S*)/.exec(line);
    if (fence) {
      const body: string[] = [];
      let j = i + 1;
      for (; j < lines.length && !lines[j]!.startsWith(fence[1]!); j++) body.push(lines[j]!);
      if (pendingKind !== undefined) out.push({ file, kind: pendingKind, line: i + 1, text: body.join('\n') });
      pendingKind = undefined;
      i = j;
      continue;
    }
    if (line.trim() !== '') pendingKind = undefined;
  }
  return out;
}

export interface DocStep {
  /** The command as written (continuation lines and heredocs included). */
  readonly command: string;
  /** The `# ...` lines under it, without the `# `. */
  readonly expected: readonly string[];
  /** 1-based line within the block. */
  readonly line: number;
}

/** Splits a shell block into commands, each with the comment lines that follow it. */
export function steps(block: string): DocStep[] {
  const out: { command: string[]; expected: string[]; line: number }[] = [];
  const lines = block.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === '') continue;
    const comment = /^\s*#\s?(.*)$/.exec(line);
    if (comment) {
      const last = out[out.length - 1];
      // A comment before any command, or after a blank line, is prose, not output.
      if (last && lines[i - 1]!.trim() !== '') last.expected.push(comment[1]!);
      continue;
    }
    const command = [line];
    const heredoc = /<<-?\s*'?"?(\w+)'?"?/.exec(line);
    let continued = line.endsWith('\\');
    while (i + 1 < lines.length && (continued || heredoc)) {
      const next = lines[++i]!;
      command.push(next);
      if (heredoc && !continued && next === heredoc[1]) break;
      continued = next.endsWith('\\');
      if (!continued && !heredoc) break;
    }
    out.push({ command, expected: [], line: i + 1 });
  }
  return out.map((s) => ({ command: s.command.join('\n'), expected: s.expected, line: s.line }));
}

/** A regular expression for one expectation line. */
function expectation(text: string): RegExp {
  const stripped = text.replace(/\s{2,}\([^)]*\)\s*$/, '').trim();
  const parts = stripped.split('...').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${parts.join('[\\s\\S]*')}$`);
}

export interface StepResult {
  readonly step: DocStep;
  readonly status: number;
  readonly output: string;
  /** Why the output does not match, or undefined. */
  readonly mismatch: string | undefined;
}

const MARK = '\u001e';

/**
 * Runs the steps in one bash process (so `cd`, variables and files carry
 * over, as in a terminal), with `rewrite` applied to each command first, and
 * compares each command's stdout with its expectation lines (all of them
 * together, one per output line).
 */
export async function runSteps(
  list: readonly DocStep[],
  options: { cwd: string; env: NodeJS.ProcessEnv; rewrite?: (command: string) => string; timeoutMs?: number },
): Promise<StepResult[]> {
  const script = list
    .map((s) => `${options.rewrite ? options.rewrite(s.command) : s.command}\nprintf '\\n${MARK}%d${MARK}\\n' "$?"`)
    .join('\n');
  const { stdout, stderr } = await new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn('bash', ['--noprofile', '--norc', '-c', script], { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    child.once('error', reject);
    child.once('close', () => {
      clearTimeout(timer);
      resolve({ stdout: out, stderr: err });
    });
  });
  const pieces = stdout.split(new RegExp(`\\n${MARK}(\\d+)${MARK}\\n`));
  return list.map((step, i) => {
    const output = pieces[2 * i];
    const status = pieces[2 * i + 1];
    if (output === undefined || status === undefined) {
      return { step, status: -1, output: '', mismatch: `did not run (bash stderr: ${stderr.slice(-2000)})` };
    }
    const got = output.replace(/\n+$/, '').split('\n').filter((l, k, all) => !(all.length === 1 && l === ''));
    let mismatch: string | undefined;
    if (Number(status) !== 0) mismatch = `exit status ${status}; stderr: ${stderr.slice(-2000)}`;
    else if (step.expected.length > 0) {
      if (got.length !== step.expected.length) mismatch = `printed ${got.length} line(s), the docs show ${step.expected.length}: ${JSON.stringify(got)}`;
      else {
        const bad = step.expected.findIndex((e, k) => !expectation(e).test(got[k]!.trim()));
        if (bad >= 0) mismatch = `line ${bad + 1}: printed ${JSON.stringify(got[bad])}, the docs show ${JSON.stringify(step.expected[bad])}`;
      }
    }
    return { step, status: Number(status), output, mismatch };
  });
}
