/**
 * @module bench/lib/raw-ort-loop
 * Child-process entry: the onnxruntime limit. One InferenceSession (default
 * options), one input tensor built once, and `session.run` back to back from
 * `concurrency` async loops: no HTTP, no JSON, no copies.
 * Usage: node raw-ort-loop.js <model.onnx> <features>
 * Prints `{"ready": true}`; then answers each command line
 * `{"concurrency", "durationS", "warmupS"}` with
 * `{"runsPerSec", "p50", "p99", "runs"}` (latency in ms).
 */
import { performance } from 'node:perf_hooks';
import * as ort from 'onnxruntime-node';
import { announce, serveCommands } from './child.js';
import { inputData } from './payload.js';
import { latencySummary, SampleBuffer } from './stats.js';

const modelPath = process.argv[2];
const features = Number(process.argv[3]);
if (!modelPath || !Number.isInteger(features) || features < 1) throw new Error('usage: raw-ort-loop.js <model.onnx> <features>');

const session = await ort.InferenceSession.create(modelPath);
const feeds = { [session.inputNames[0]!]: new ort.Tensor('float32', Float32Array.from(inputData(features)), [1, features]) };

async function loop(concurrency: number, durationS: number, samples?: SampleBuffer): Promise<{ runs: number; seconds: number }> {
  const start = performance.now();
  const end = start + durationS * 1000;
  let runs = 0;
  const one = async (): Promise<void> => {
    while (performance.now() < end) {
      const t0 = performance.now();
      await session.run(feeds);
      samples?.push(performance.now() - t0);
      runs++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, one));
  return { runs, seconds: (performance.now() - start) / 1000 };
}

announce({ ready: true });
serveCommands(
  async (command) => {
    const { concurrency, durationS, warmupS } = command as { concurrency: number; durationS: number; warmupS?: number };
    if (warmupS && warmupS > 0) await loop(concurrency, warmupS);
    const samples = new SampleBuffer();
    const { runs, seconds } = await loop(concurrency, durationS, samples);
    return { runsPerSec: runs / seconds, ...latencySummary(samples.values()), runs };
  },
  () => session.release(),
);
