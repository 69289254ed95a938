/**
 * @module examples/pipelines/write-repository
 * Writes a pipeline's models as a Triton model repository: per model
 * `config.pbtxt`, version directories (with `model.onnx` when there is one),
 * extra files in the model directory (labels.txt, tokenizer.json) and in the
 * version directory (a JS step's model.mjs).
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ModelDirContents } from '../models/zoo.js';

export interface PipelineModel extends ModelDirContents {
  /** Files in the model directory, by name (labels, tokenizer.json). */
  readonly files?: Readonly<Record<string, string | Uint8Array>>;
  /** Files in each version directory, by name (model.mjs). */
  readonly versionFiles?: Readonly<Record<string, string | Uint8Array>>;
}

/** Write every model under `root` (replacing what was there); returns `root`. */
export async function writePipelineRepository(root: string, models: Readonly<Record<string, PipelineModel>>): Promise<string> {
  await mkdir(root, { recursive: true });
  for (const [name, m] of Object.entries(models)) {
    const dir = path.join(root, name);
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
    if (m.config !== undefined) await writeFile(path.join(dir, 'config.pbtxt'), m.config);
    for (const [file, content] of Object.entries(m.files ?? {})) await writeFile(path.join(dir, file), content);
    for (const version of m.versions ?? [1]) {
      const vdir = path.join(dir, String(version));
      await mkdir(vdir, { recursive: true });
      if (m.onnx !== undefined) await writeFile(path.join(vdir, 'model.onnx'), m.onnx);
      for (const [file, content] of Object.entries(m.versionFiles ?? {})) await writeFile(path.join(vdir, file), content);
    }
  }
  return root;
}
