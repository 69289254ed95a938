/**
 * The CLI's progress (cli/progress.ts) as each kind of stderr shows it: a
 * terminal gets one redrawn line (a bar), a log gets plain lines no more often
 * than the interval, plus the last one, so a multi-GB upload's log stays short.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProgressBar, StatusLine } from '../../../src/cli/progress.js';

function stream(isTTY: boolean): { out: string[]; s: NodeJS.WritableStream & { isTTY: boolean; columns: number } } {
  const out: string[] = [];
  const s = { isTTY, columns: 80, write: (chunk: string) => out.push(chunk) > 0 } as unknown as NodeJS.WritableStream & { isTTY: boolean; columns: number };
  return { out, s };
}

describe('cli progress', () => {
  it('not a terminal: the first update, then none within the interval, then the final line', () => {
    const { out, s } = stream(false);
    const bar = new ProgressBar(s, 1000, 'uploading x', { intervalMs: 60_000 });
    for (let done = 0; done <= 1000; done += 10) bar.update(done, `part ${done}`);
    bar.finish(1000);
    assert.equal(out.length, 2);
    assert.match(out[0]!, /^uploading x \[\.{30}\] +0% 0 B\/1000 B .*\(part 0\)\n$/);
    assert.match(out[1]!, /^uploading x \[#{30}\] 100% 1000 B\/1000 B/);
    assert.ok(out.every((l) => !l.includes('\r')));
  });

  it('not a terminal, interval 0: a line per update', () => {
    const { out, s } = stream(false);
    const bar = new ProgressBar(s, 100, 'packing y', { intervalMs: 0 });
    for (let done = 10; done <= 100; done += 10) bar.update(done);
    assert.equal(out.length, 10);
  });

  it('a terminal: redrawn in place, ended with a newline', () => {
    const { out, s } = stream(true);
    const bar = new ProgressBar(s, 100, 'packing y');
    bar.update(50);
    bar.finish(100);
    assert.ok(out.every((l) => l.startsWith('\r')));
    assert.ok(out.at(-1)!.endsWith('\n'));
    assert.match(out.at(-1)!, /100%/);
  });

  it('a status line: redrawn on a terminal, lasting lines above it; plain lines elsewhere', () => {
    const tty = stream(true);
    const line = new StatusLine(tty.s);
    line.status(1, 4, '  concurrency 2: window 1: 10.0 req/s');
    line.log('perf: concurrency 2: 10.0 req/s');
    line.end();
    assert.match(tty.out[0]!, /^\r\u001b\[K\[#{5}\.{15}\] 1\/4 concurrency 2: window 1/);
    assert.deepEqual(tty.out.slice(1), ['\r\u001b[K', 'perf: concurrency 2: 10.0 req/s\n']);

    const log = stream(false);
    const plain = new StatusLine(log.s);
    plain.status(1, 4, '  concurrency 2: window 1');
    plain.log('perf: done');
    plain.end();
    assert.deepEqual(log.out, ['  concurrency 2: window 1\n', 'perf: done\n']);
  });
});
