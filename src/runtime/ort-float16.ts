/**
 * @module runtime/ort-float16
 * float16 tensor data stays Uint16Array bits (our Tensor type) on every
 * Node.js. Where the Float16Array global exists (Node.js 24),
 * onnxruntime-common maps 'float16' to it and turns Uint16Array data into a
 * Float16Array view, and onnxruntime-node 1.30's binding then reads such an
 * input as zero bytes: every float16 run fails with "not enough space:
 * expected 8, got 0" (microsoft/onnxruntime#26791; the binding's fix is not
 * released). onnxruntime-common makes that choice once per thread, on the
 * first tensor it constructs: this module constructs that first tensor with
 * Float16Array hidden, so the choice is Uint16Array (as on Node.js 20), then
 * puts the global back for everything else. Imported, before any tensor is
 * made, by every runtime module that makes tensors (onnx-io, prime); the
 * FP16 tests of the zoo and of onnx-session fail without it on Node.js 24.
 */
import * as ort from 'onnxruntime-node';

const float16Array = Object.getOwnPropertyDescriptor(globalThis, 'Float16Array');
if (float16Array) {
  delete (globalThis as { Float16Array?: unknown }).Float16Array;
  try {
    new ort.Tensor('float32', new Float32Array(1), [1]);
  } finally {
    Object.defineProperty(globalThis, 'Float16Array', float16Array);
  }
}
