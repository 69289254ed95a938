/**
 * @module test/support/slow-model
 * A model that takes a noticeable, CPU-bound time per request while the
 * request itself stays tiny: the input row is expanded to `rows` rows inside
 * the graph, pushed through `layers` MatMuls with one shared weight (so the
 * file stays small), and averaged back to one row. Used to keep requests in
 * flight during unload and SIGTERM tests without sleeping.
 */
import { attr, buildModel, node, tensor, valueInfo } from '../../examples/models/onnx-builder.js';
import { configText, type ZooModel } from '../../examples/models/zoo.js';

/**
 * With `rowsInput`, the expansion shape is a request input `SHAPE` (INT64
 * [2] = [rows, width]) instead of a constant: each request chooses its cost,
 * and the load's implicit warm-up (zeros, an invalid shape) costs nothing.
 */
export function slowModel(options: { width?: number; rows?: number; layers?: number; rowsInput?: boolean } = {}): ZooModel {
  const width = options.width ?? 512;
  const rows = options.rows ?? 2048;
  const layers = options.layers ?? 32;
  // Near-identity weights keep values bounded through many layers.
  const w = new Float32Array(width * width);
  for (let i = 0; i < width; i++) w[i * width + i] = 1 / 1.001;
  const nodes = [node('Expand', ['INPUT0', 'shape'], ['h0'])];
  for (let i = 0; i < layers; i++) nodes.push(node('MatMul', [`h${i}`, 'W'], [`h${i + 1}`]));
  nodes.push(node('ReduceMean', [`h${layers}`], ['OUTPUT0'], { attributes: { axes: attr.ints([0]), keepdims: attr.int(1) } }));
  const shapeName = options.rowsInput ? 'SHAPE' : 'shape';
  nodes[0] = node('Expand', ['INPUT0', shapeName], ['h0']);
  const onnx = buildModel({
    inputs: [valueInfo('INPUT0', 'FP32', [1, width]), ...(options.rowsInput ? [valueInfo('SHAPE', 'INT64', [2])] : [])],
    outputs: [valueInfo('OUTPUT0', 'FP32', [1, width])],
    nodes,
    initializers: [tensor('W', 'FP32', [width, width], w), ...(options.rowsInput ? [] : [tensor('shape', 'INT64', [2], [rows, width])])],
  });
  const config = configText({
    maxBatchSize: 0,
    inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [1, width] }, ...(options.rowsInput ? [{ name: 'SHAPE', dataType: 'INT64' as const, dims: [2] }] : [])],
    outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [1, width] }],
  });
  return { onnx, config };
}
