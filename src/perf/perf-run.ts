/**
 * @module perf/perf-run
 * A whole `perf` run, the engine both commands share (`onnx-mme perf` prints
 * it, `onnx-mme tune` measures each candidate config with it): find the
 * model's inputs, build the requests, then for each step of the sweep run
 * the load (perf/load-step.ts) and read the server's own counters around it
 * (perf/server-split.ts) where the target offers them.
 */
import { readFile } from 'node:fs/promises';
import { createHttpTarget, getJson, whyNoJson, type Target } from './http-target.js';
import { runStep, type StepProgress, type StepResult, type StepSettings } from './load-step.js';
import {
  encodeV2,
  generatedTensors,
  payloadsFromFile,
  type InputDataMode,
  type InputMetadata,
  type RequestPayload,
  type ShapeOptions,
} from './request-payloads.js';
import { createSdkTarget } from './sdk-target.js';
import { findCounterReader, splitBetween, ZERO_COUNTERS, type CounterReader, type ServerSplit } from './server-split.js';

export interface PerfOptions {
  readonly baseUrl: string;
  /** KServe model name (also where metadata is read); defaults to the target model. */
  readonly model?: string;
  /** SageMaker target model (X-Amzn-SageMaker-Target-Model / TargetModel). */
  readonly targetModel?: string;
  /** A SageMaker endpoint name: InvokeEndpoint through the SDK, at baseUrl. */
  readonly endpointName?: string;
  readonly region?: string;
  readonly mode: 'concurrency' | 'rate';
  readonly values: readonly number[];
  readonly windowMs: number;
  readonly maxStepMs: number;
  readonly tolerance: number;
  readonly requestTimeoutMs: number;
  readonly maxInflight: number;
  readonly binary: boolean;
  readonly inputData: { readonly kind: InputDataMode } | { readonly kind: 'files'; readonly files: readonly string[] };
  readonly shape: ShapeOptions;
  /** Event-loop use (%) above which a step is flagged as limited by the generator. */
  readonly clientSaturationPct?: number;
  readonly progress?: (line: string) => void;
  /** Called after each step; false ends the sweep early (tune: latency objective exceeded, throughput flat). */
  readonly continueAfter?: (step: PerfStep, steps: readonly PerfStep[]) => boolean;
}

export interface PerfStep extends StepResult {
  readonly server: ServerSplit | undefined;
  readonly clientSaturated: boolean;
}

export interface PerfRun {
  readonly target: string;
  readonly model: string;
  readonly inputs: readonly InputMetadata[] | undefined;
  readonly steps: readonly PerfStep[];
  /** Every inference request sent, all steps. */
  readonly requestsSent: number;
  readonly warnings: readonly string[];
  readonly errorSamples: Readonly<Record<string, string>>;
}

/** A problem with what the user asked for (no metadata, unreadable file): the CLI's exit 2 when it is the command line's fault. */
export class PerfSetupError extends Error {
  override readonly name = 'PerfSetupError';
}

export const DEFAULT_CLIENT_SATURATION_PCT = 90;

interface Metadata {
  readonly name: string;
  readonly inputs: readonly InputMetadata[];
}

function parseMetadata(doc: unknown): Metadata | undefined {
  const d = doc as { name?: unknown; inputs?: unknown };
  if (d === undefined || d === null || typeof d !== 'object' || !Array.isArray(d.inputs)) return undefined;
  const inputs = (d.inputs as Record<string, unknown>[]).filter(
    (i) => typeof i.name === 'string' && typeof i.datatype === 'string' && Array.isArray(i.shape),
  ) as unknown as InputMetadata[];
  return { name: typeof d.name === 'string' ? d.name : '', inputs };
}

async function buildPayloads(options: PerfOptions, metadata: Metadata | undefined, modelLabel: string, kserve: boolean): Promise<RequestPayload[]> {
  const data = options.inputData;
  if (data.kind === 'files') {
    const out: RequestPayload[] = [];
    for (const file of data.files) {
      let bytes: Buffer;
      try {
        bytes = await readFile(file);
      } catch (err) {
        throw new PerfSetupError(`${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
      }
      let npyName: string | undefined;
      if (kserve && /\.npy$/i.test(file)) {
        if (metadata?.inputs.length !== 1)
          throw new PerfSetupError(
            `${file}: a .npy request needs a model with exactly one input (from its metadata) on the KServe route; use --target-model for SageMaker's /invocations`,
          );
        npyName = metadata.inputs[0]!.name;
      }
      try {
        out.push(...payloadsFromFile(file, bytes, options.binary, npyName));
      } catch (err) {
        throw new PerfSetupError((err as Error).message);
      }
    }
    return out;
  }
  if (metadata === undefined) {
    const url = `${options.baseUrl.replace(/\/+$/, '')}/v2/models/${encodeURIComponent(modelLabel)}`;
    throw new PerfSetupError(`no metadata for model '${modelLabel}' (GET ${url}: ${await whyNoJson(url)}); give real requests with --input-data FILE`);
  }
  if (metadata.inputs.length === 0) throw new PerfSetupError(`model '${modelLabel}': its metadata lists no inputs`);
  try {
    return generatedTensors(metadata.inputs, options.shape, data.kind).map((t) => encodeV2(t, options.binary));
  } catch (err) {
    throw new PerfSetupError(`model '${modelLabel}': ${(err as Error).message}`);
  }
}

function label(step: { mode: string; concurrency: number; rateRps: number | undefined }): string {
  return step.mode === 'rate' ? `rate ${step.rateRps} req/s` : `concurrency ${step.concurrency}`;
}

export async function runPerf(options: PerfOptions): Promise<PerfRun> {
  const progress = options.progress ?? (() => undefined);
  const base = options.baseUrl.replace(/\/+$/, '');
  const modelLabel = options.model ?? options.targetModel ?? '';
  if (modelLabel === '' && options.inputData.kind !== 'files')
    throw new PerfSetupError('give --model (or --target-model) so the inputs can be read from its metadata, or --input-data FILE');
  const metadata = modelLabel === '' ? undefined : parseMetadata(await getJson(`${base}/v2/models/${encodeURIComponent(modelLabel)}`));
  const kserve = options.endpointName === undefined && options.targetModel === undefined;
  const payloads = await buildPayloads(options, metadata, modelLabel, kserve);
  if (kserve && payloads.some((p) => p.kind === 'npy')) throw new PerfSetupError('a .npy request needs a one-input model on the KServe route');

  const target: Target =
    options.endpointName !== undefined
      ? await createSdkTarget({
          endpointName: options.endpointName,
          ...(options.targetModel === undefined ? {} : { targetModel: options.targetModel }),
          endpointUrl: base,
          ...(options.region === undefined ? {} : { region: options.region }),
        })
      : createHttpTarget({ baseUrl: base, model: modelLabel, ...(options.targetModel === undefined ? {} : { targetModel: options.targetModel }) });
  const prepared = payloads.map((p) => target.prepare(p));
  const names = [...new Set([metadata?.name, modelLabel].filter((n): n is string => n !== undefined && n !== ''))];
  const saturation = options.clientSaturationPct ?? DEFAULT_CLIENT_SATURATION_PCT;
  progress(
    `perf: ${target.description}; ${payloads.length} distinct request${payloads.length === 1 ? '' : 's'} (${payloads[0]!.body.length} bytes${options.binary ? ', binary' : ''})`,
  );

  const steps: PerfStep[] = [];
  const warnings: string[] = [];
  // A real SageMaker endpoint answers neither route (no split); a local server behind the SDK path does.
  const reader: CounterReader | undefined = names.length > 0 ? await findCounterReader(base, modelLabel, names) : undefined;
  let sentTotal = 0;
  try {
    for (const value of options.values) {
      const settings: StepSettings = {
        mode: options.mode,
        value,
        windowMs: options.windowMs,
        maxStepMs: options.maxStepMs,
        tolerance: options.tolerance,
        requestTimeoutMs: options.requestTimeoutMs,
        maxInflight: options.maxInflight,
      };
      const name = options.mode === 'rate' ? `rate ${value} req/s` : `concurrency ${value}`;
      const before = reader === undefined ? undefined : ((await reader.read()) ?? ZERO_COUNTERS);
      const onWindow = (p: StepProgress): void =>
        progress(`  ${name}: window ${p.window}: ${p.throughputRps.toFixed(1)} req/s, mean ${p.meanMs.toFixed(2)} ms`);
      const result = await runStep(target, prepared, settings, onWindow);
      sentTotal += result.requestsSent;
      const after = reader === undefined ? undefined : await reader.read();
      const server = reader !== undefined && before !== undefined && after !== undefined ? splitBetween(before, after, reader.source) : undefined;
      const clientSaturated = result.clientEventLoopPct >= saturation;
      const step: PerfStep = { ...result, server, clientSaturated };
      steps.push(step);
      const errs = Object.entries(result.errorsByStatus)
        .map(([k, v]) => `${k}×${v}`)
        .join(' ');
      progress(
        `perf: ${label(step)}: ${result.throughputRps.toFixed(1)} req/s, p50 ${result.latency.p50Ms.toFixed(2)} ms, p99 ${result.latency.p99Ms.toFixed(2)} ms${errs ? `, errors ${errs}` : ''}${result.stable ? '' : ' (not stable within the step time)'}`,
      );
      if (clientSaturated) {
        const w = `${label(step)}: the load generator's event loop was busy ${result.clientEventLoopPct.toFixed(0)}% of the time (CPU ${result.clientCpuPct.toFixed(0)}% of a core): the client, not the server, may be what limits these numbers; run perf from another machine or several processes`;
        warnings.push(w);
        progress(`perf: warning: ${w}`);
      }
      if (options.continueAfter !== undefined && !options.continueAfter(step, steps)) break;
    }
  } finally {
    target.close();
  }
  return {
    target: target.description,
    model: metadata?.name || modelLabel,
    inputs: metadata?.inputs,
    steps,
    requestsSent: sentTotal,
    warnings,
    errorSamples: Object.fromEntries(target.errorSamples),
  };
}
