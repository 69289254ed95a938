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
  // Comment lines right under a command (no blank line between) are its output; other comments are prose.
  let underCommand = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === '') {
      underCommand = false;
      continue;
    }
    const comment = /^\s*#\s?(.*)$/.exec(line);
    if (comment) {
      if (underCommand) out[out.length - 1]!.expected.push(comment[1]!);
      continue;
    }
    underCommand = true;
    const command = [line];
    const heredoc = /<<-?\s*'?"?(\w+)'?"?/.exec(line);
    let state = quoteState('none', line);
    let continued = state === 'none' && line.endsWith('\\');
    // A command goes on while a heredoc has not ended, a quote is open, or a line ends with a backslash.
    while (i + 1 < lines.length && (heredoc !== null || state !== 'none' || continued)) {
      const next = lines[++i]!;
      command.push(next);
      if (heredoc !== null) {
        if (next === heredoc[1]) break;
        continue;
      }
      state = quoteState(state, next);
      continued = state === 'none' && next.endsWith('\\');
    }
    out.push({ command, expected: [], line: i + 1 });
  }
  return out.map((s) => ({ command: s.command.join('\n'), expected: s.expected, line: s.line }));
}

type Quote = 'none' | 'single' | 'double';

/** The shell quoting state after `line`, starting in `state` (enough for the docs' commands). */
function quoteState(state: Quote, line: string): Quote {
  for (let k = 0; k < line.length; k++) {
    const c = line[k]!;
    if (state === 'single') {
      if (c === "'") state = 'none';
    } else if (c === '\\') k++;
    else if (state === 'double') {
      if (c === '"') state = 'none';
    } else if (c === "'") state = 'single';
    else if (c === '"') state = 'double';
    else if (c === '#' && (k === 0 || /\s/.test(line[k - 1]!))) break; // a trailing comment
  }
  return state;
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
  // Background servers a block starts (`... &`) stop with it, whatever happens.
  const script = [
    "trap 'kill $(jobs -p) 2>/dev/null' EXIT",
    ...list.map((s) => `${options.rewrite ? options.rewrite(s.command) : s.command}\nprintf '\\n${MARK}%d${MARK}\\n' "$?"`),
  ].join('\n');
  const timeoutMs = options.timeoutMs ?? 60_000;
  const { stdout, stderr } = await new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
    // Its own process group: past the timeout the whole group is killed, the block's background servers with bash, so
    // none of them outlives it holding the output pipes open (which would leave this wait without an end).
    const child = spawn('bash', ['--noprofile', '--norc', '-c', script], {
      cwd: options.cwd,
      env: options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const timer = setTimeout(() => {
      err += `\n[the block ran past ${timeoutMs} ms: its process group was killed]`;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    }, timeoutMs);
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
    const got = output
      .replace(/\n+$/, '')
      .split('\n')
      .filter((l, k, all) => !(all.length === 1 && l === ''));
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
