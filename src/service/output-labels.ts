/**
 * @module service/output-labels
 * Class labels for the classification extension: an output's
 * `label_filename` names a file in the model directory, one label per line,
 * line i = class i (Triton's label provider). Read on the first request that
 * asks for classification and cached per loaded model, so a model that is
 * unloaded (and garbage-collected) takes its labels with it.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { pathFreeMessage, ServingError } from '../errors.js';
import type { LoadedModel } from '../registry/loaded-model.js';

const cache = new WeakMap<LoadedModel, Map<string, Promise<readonly string[]>>>();

/** Throws without naming the requested model (InferenceService names it: errors.ts inModel). */
async function read(model: LoadedModel, file: string): Promise<readonly string[]> {
  // The name comes from config.pbtxt, which may come from an untrusted archive: it must stay in the model directory.
  if (file === '' || path.isAbsolute(file) || file.split(/[\\/]/).includes('..')) {
    throw new ServingError('INVALID_MODEL', `label_filename '${file}' must name a file inside the model directory`);
  }
  try {
    const text = await readFile(path.join(model.dir, file), 'utf8');
    const lines = text.split(/\r?\n/);
    if (lines[lines.length - 1] === '') lines.pop();
    return Object.freeze(lines);
  } catch (err) {
    throw new ServingError('INVALID_MODEL', `cannot read label file '${file}' of model '${model.name}': ${pathFreeMessage(err)}`, { cause: err });
  }
}

/** The labels of `output` (undefined when it declares no label_filename). A failed read is not cached. */
export function outputLabels(model: LoadedModel, output: string): Promise<readonly string[]> | undefined {
  const file = model.config.output.find((o) => o.name === output)?.labelFilename;
  if (file === undefined) return undefined;
  let perModel = cache.get(model);
  if (!perModel) {
    perModel = new Map();
    cache.set(model, perModel);
  }
  let labels = perModel.get(output);
  if (!labels) {
    labels = read(model, file);
    perModel.set(output, labels);
    labels.catch(() => perModel.delete(output));
  }
  return labels;
}
