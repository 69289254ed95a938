/**
 * docs/perf-and-tune.md against the commands it documents: every
 * `onnx-mme perf` / `onnx-mme tune` line in its code blocks uses only
 * options the command accepts (its --help lists them), and the worked
 * example's perf command, run as written against the demo MLP served by the
 * real server (shortened with --duration-s), succeeds and prints the table
 * the page shows.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { mkdir, readFile } from 'node:fs/promises';
import { mlp, packTarGz, writeModelDir } from '../../examples/models/zoo.js';
import { DEMO_SETTINGS } from '../../examples/demo/build-demo-repository.js';
import { runCli } from '../support/cli.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { startTestServer } from '../support/test-server.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const ctx = new Cleanups();
after(() => ctx.run());

/** Command lines (continuations joined) in the page's ```sh blocks that start with `onnx-mme <command>`. */
function commandLines(md: string, command: string): string[] {
  const out: string[] = [];
  for (const block of md.matchAll(/```sh\n([\s\S]*?)```/g)) {
    const joined = block[1]!.replace(/\\\n\s*/g, ' ');
    for (const line of joined.split('\n')) if (line.startsWith(`onnx-mme ${command} `)) out.push(line.replace(/\s+#.*$/, '').trim());
  }
  return out;
}

describe('docs/perf-and-tune.md', () => {
  it('uses only options the commands accept', async () => {
    const md = await readFile(path.join(repoRoot, 'docs', 'perf-and-tune.md'), 'utf8');
    for (const command of ['perf', 'tune']) {
      const lines = commandLines(md, command);
      assert.ok(lines.length > 0, `the page shows onnx-mme ${command}`);
      const help = (await runCli([command, '--help'])).stdout;
      for (const line of lines) {
        for (const flag of line.match(/(?<=\s)--?[a-z][a-z0-9-]*/g) ?? [])
          assert.ok(
            help.includes(flag === '-o' ? '-o,' : `${flag} `) || help.includes(`${flag},`) || help.includes(`${flag}\n`),
            `${line}: ${flag} is not in 'onnx-mme ${command} --help'`,
          );
      }
    }
  });

  it('the worked perf command runs as written against the demo MLP', async () => {
    const md = await readFile(path.join(repoRoot, 'docs', 'perf-and-tune.md'), 'utf8');
    const line = commandLines(md, 'perf').find((l) => l.includes('--model mlp.tar.gz'));
    assert.ok(line, 'the page has a perf command for the demo MLP');
    const work = await tempDir(ctx, 'onnx-mme-docs-perf-');
    // The demo's mlp.tar.gz, built as the demo builder builds it.
    await mkdir(path.join(work, 'models'));
    await packTarGz(await writeModelDir(path.join(work, 'build'), 'mlp', mlp(DEMO_SETTINGS.mlp)), path.join(work, 'models', 'mlp.tar.gz'));
    const server = await startTestServer({ modelSource: path.join(work, 'models'), cacheDir: path.join(work, 'cache'), env: { MME_LOG_LEVEL: 'warn' } });
    ctx.after(() => server.close());
    const args = line
      .split(/\s+/)
      .slice(1)
      .map((a) => a.replace(/^http:\/\/127\.0\.0\.1:8080$/, server.url).replace(/^(perf|mlp)\.(json|csv|svg)$/, path.join(work, a)));
    assert.ok(args.includes(server.url), `the command targets http://127.0.0.1:8080 (npm start): ${line}`);
    const r = await runCli([...args, '--duration-s', '0.5', '--window-s', '0.1']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /conc\s+req\/s\s+p50 ms\s+p90 ms\s+p95 ms\s+p99 ms\s+requests\s+errors\s+client cpu\s+queue\s+in\s+infer\s+out\s+batch/);
  });
});
