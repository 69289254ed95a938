/**
 * @module config/model-config-text
 * config.pbtxt text → the raw JSON form, before normalisation. The loader
 * needs this intermediate step: auto-complete fills missing inputs/outputs
 * from the ONNX graph before the config is validated and frozen.
 */
import { ModelConfigDescriptor } from './model-config-schema.js';
import { parseTextFormat } from './pbtxt/parser.js';

export function parseModelConfigJson(text: string, sourceName: string): Record<string, unknown> {
  return parseTextFormat(text, ModelConfigDescriptor, sourceName);
}
