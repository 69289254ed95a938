/**
 * @module test/unit/backends/step-harness
 * Loads a processing step from config.pbtxt text the way the registry does
 * (config parsed and validated, then backends/loadStep), in a temp model
 * directory with whatever files the test writes.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadStep, type LoadedStep } from '../../../src/backends/step-backend.js';
import { parseModelConfig } from '../../../src/config/model-config.js';
import { ServingError } from '../../../src/errors.js';
import { createLogger, type Logger } from '../../../src/observability/logger.js';
import type { Tensor } from '../../../src/protocol/tensor.js';

export interface StepFixture {
  readonly step: LoadedStep;
  readonly dir: string;
  run(inputs: Record<string, Tensor>, outputs?: readonly string[]): Promise<Map<string, Tensor>>;
  close(): Promise<void>;
}

export interface StepFiles {
  /** Files in the model directory. */
  readonly model?: Readonly<Record<string, string | Uint8Array>>;
  /** Files in the version directory (1/). */
  readonly version?: Readonly<Record<string, string | Uint8Array>>;
}

async function prepare(name: string, files: StepFiles): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-step-'));
  const dir = path.join(root, name);
  await mkdir(path.join(dir, '1'), { recursive: true });
  for (const [f, c] of Object.entries(files.model ?? {})) await writeFile(path.join(dir, f), c);
  for (const [f, c] of Object.entries(files.version ?? {})) await writeFile(path.join(dir, '1', f), c);
  return dir;
}

export async function loadStepFromText(
  name: string,
  configText: string,
  files: StepFiles = {},
  allowJs = true,
  logger: Logger = createLogger('silent'),
): Promise<StepFixture> {
  const dir = await prepare(name, files);
  const cleanup = (): Promise<void> => rm(path.dirname(dir), { recursive: true, force: true });
  let step: LoadedStep;
  let outputNames: string[];
  try {
    const config = parseModelConfig(configText, { sourceName: `${name}/config.pbtxt`, directoryName: name });
    outputNames = config.output.map((o) => o.name);
    step = await loadStep({ config, modelDir: dir, versionDir: path.join(dir, '1'), version: 1, label: name, logger, allowJs });
  } catch (err) {
    await cleanup();
    throw err;
  }
  return {
    step,
    dir,
    run: (inputs, outputs) => step.execute(new Map(Object.entries(inputs)), outputs ?? outputNames),
    close: async () => {
      await step.release();
      await cleanup();
    },
  };
}

/** The load error of a step (a ServingError), or a failure when it loads. */
export async function loadError(name: string, configText: string, files: StepFiles = {}, allowJs = true): Promise<ServingError> {
  try {
    const f = await loadStepFromText(name, configText, files, allowJs);
    await f.close();
  } catch (err) {
    if (err instanceof ServingError) return err;
    throw err;
  }
  throw new Error(`step '${name}' loaded, but a load error was expected`);
}

export function f32(shape: number[], values: number[]): Tensor {
  return { datatype: 'FP32', shape, data: Float32Array.from(values) };
}

export function i64(shape: number[], values: number[]): Tensor {
  return { datatype: 'INT64', shape, data: BigInt64Array.from(values.map(BigInt)) };
}

export function numbers(t: Tensor | undefined): number[] {
  if (!t) throw new Error('tensor missing');
  return Array.from(t.data as ArrayLike<number | bigint>, Number);
}

export function assertClose(actual: readonly number[], expected: readonly number[], tolerance = 1e-6): void {
  if (actual.length !== expected.length) throw new Error(`length ${actual.length} vs ${expected.length}`);
  actual.forEach((v, i) => {
    if (!(Math.abs(v - expected[i]!) <= tolerance * Math.max(1, Math.abs(expected[i]!))))
      throw new Error(`element ${i}: ${v} vs ${expected[i]} (actual ${JSON.stringify(actual)})`);
  });
}
