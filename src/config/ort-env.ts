/**
 * @module config/ort-env
 * Imported for its side effect only, as the first import of every entry point
 * (src/main.ts, src/cli/onnx-mme.ts) and of every module that loads
 * onnxruntime-node or starts a thread that may, so that whichever of them a
 * process (a test, a benchmark, an embedding program) reaches first,
 * ORT_DISABLE_TELEMETRY is decided before onnxruntime creates its
 * environment: ESM evaluates a module's imports in order, depth first, so
 * this runs before any module imported after it. See ./ort-telemetry.ts.
 *
 * In a worker thread `process.env` is a private copy that native code never
 * sees; there this changes nothing, and the value the main thread set (the
 * same decision) is the one onnxruntime reads.
 */
import { applyOrtTelemetrySetting } from './ort-telemetry.js';

applyOrtTelemetrySetting(process.env);
