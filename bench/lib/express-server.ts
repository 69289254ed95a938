/**
 * @module bench/lib/express-server
 * Child-process entry: the baseline people write by hand. express.json, one
 * onnxruntime InferenceSession created at startup with default options, and
 * per request: a Tensor from `req.body.inputs[0].data`, `await session.run`,
 * `res.json` with a KServe v2 response. No validation, no model management,
 * no metrics. Usage: node express-server.js <model.onnx>
 * Prints `{"port": n}` when listening; exits when stdin ends.
 */
import express from 'express';
import * as ort from 'onnxruntime-node';
import { announce, serveCommands } from './child.js';

interface V2Input {
  name: string;
  shape: number[];
  datatype: string;
  data: number[];
}

const modelPath = process.argv[2];
if (!modelPath) throw new Error('usage: express-server.js <model.onnx>');

const session = await ort.InferenceSession.create(modelPath);
const inputName = session.inputNames[0]!;

const app = express();
app.use(express.json({ limit: '6mb' }));
app.post('/invocations', async (req, res) => {
  const input = (req.body as { inputs: V2Input[] }).inputs[0]!;
  const tensor = new ort.Tensor('float32', Float32Array.from(input.data), input.shape);
  const results = await session.run({ [inputName]: tensor });
  res.json({
    model_name: 'model',
    model_version: '1',
    outputs: session.outputNames.map((name) => {
      const t = results[name]!;
      return { name, datatype: 'FP32', shape: t.dims, data: Array.from(t.data as Float32Array) };
    }),
  });
});

const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address();
  announce({ port: typeof address === 'object' && address ? address.port : 0 });
});
server.keepAliveTimeout = 65_000;
serveCommands(
  async () => ({}),
  async () => {
    server.closeAllConnections();
    await session.release();
  },
);
