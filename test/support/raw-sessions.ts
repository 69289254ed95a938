/**
 * Child-process entry: the reference a density figure is a ratio to. A plain
 * onnxruntime-node process creates one session per model under
 * argv[2] (`<root>/<name>/1/model.onnx`, every directory there), with one
 * intra-op thread as the server's default, and runs each once with zeros
 * (`[1, argv[3]]` FP32 on INPUT0). It prints one JSON line with its own
 * resident set (kB) and thread count before the first session (after
 * onnxruntime's fixed cost is paid, as the server pays it at start-up) and
 * after the last, then waits for stdin to end.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import * as ort from 'onnxruntime-node';

async function procStatus(): Promise<{ rssKb: number; threads: number }> {
  const text = await readFile('/proc/self/status', 'utf8');
  const rss = /^VmRSS:\s+(\d+) kB$/m.exec(text);
  const threads = /^Threads:\s+(\d+)$/m.exec(text);
  if (!rss || !threads) throw new Error('/proc/self/status has no VmRSS or Threads line');
  return { rssKb: Number(rss[1]), threads: Number(threads[1]) };
}

const root = process.argv[2]!;
const features = Number(process.argv[3] ?? '16');
const names = (await readdir(root, { withFileTypes: true }))
  .filter((d) => d.isDirectory())
  .map((d) => d.name)
  .sort();
const feeds = { INPUT0: new ort.Tensor('float32', new Float32Array(features), [1, features]) };
const options: ort.InferenceSession.SessionOptions = { intraOpNumThreads: 1 };

// onnxruntime's fixed cost, paid before the baseline (the server pays it at start-up: runtime/prime.ts).
const prime = await ort.InferenceSession.create(path.join(root, names[0]!, '1', 'model.onnx'), options);
await prime.run(feeds);
await prime.release();
await new Promise((r) => setTimeout(r, 200));
const before = await procStatus();
const sessions: ort.InferenceSession[] = [];
for (const name of names) {
  const session = await ort.InferenceSession.create(path.join(root, name, '1', 'model.onnx'), options);
  await session.run(feeds);
  sessions.push(session);
}
await new Promise((r) => setTimeout(r, 200));
const after = await procStatus();
process.stdout.write(`${JSON.stringify({ models: sessions.length, before, after })}\n`);
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
