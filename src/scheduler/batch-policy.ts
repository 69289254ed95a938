/**
 * @module scheduler/batch-policy
 * What the dynamic batcher of one model does, resolved once at load from the
 * model's config and the server-wide defaults (env, config/server-config.ts):
 *
 * - `dynamic_batching { … }` written in config.pbtxt: Triton's knobs, exactly.
 * - no block (or only the empty one auto-complete adds) and max_batch_size > 0:
 *   the no-tuning default. Requests queued while the previous batch runs are
 *   merged into the next, with MME_BATCH_MAX_DELAY_US of added delay (0 by
 *   default), so latency at low load is unchanged and throughput rises under load.
 * - max_batch_size 0, or MME_DYNAMIC_BATCHING=false: every request runs alone
 *   (Triton's default scheduler), still through a bounded queue and at most
 *   `instances` at once.
 *
 * Every queue is bounded: max_queue_size 0 (Triton's "unbounded") becomes
 * MME_MAX_QUEUE_SIZE.
 */
import { DEFAULT_MAX_BATCH_SIZE } from '../config/auto-complete.js';
import type { InstanceGroupConfig, ModelConfig, QueuePolicy } from '../config/model-config-types.js';

/** Server-wide settings that apply where config.pbtxt says nothing. */
export interface BatchingDefaults {
  /** MME_DYNAMIC_BATCHING: false runs every request alone, whatever the configs say (e.g. to benchmark without batching). */
  readonly enabled: boolean;
  /** MME_BATCH_MAX_DELAY_US (or SAGEMAKER_TS_MAX_BATCH_DELAY in ms): delay for models without a dynamic_batching block. */
  readonly maxQueueDelayUs: number;
  /** MME_BATCH_MAX_SIZE (or SAGEMAKER_TS_BATCH_SIZE): most rows per batch for models without a block; undefined = max_batch_size. */
  readonly maxBatchSize: number | undefined;
  /** MME_MAX_QUEUE_SIZE: waiting requests per model (per priority level) where the config sets no max_queue_size. */
  readonly maxQueueSize: number;
  /** MME_DEFAULT_MAX_BATCH_SIZE: the max_batch_size auto-complete gives a model that can batch and whose config sets none. */
  readonly autoCompleteMaxBatchSize: number;
}

export interface ResolvedQueuePolicy {
  readonly timeoutAction: 'REJECT' | 'DELAY';
  /** 0 = requests wait as long as it takes. */
  readonly defaultTimeoutUs: number;
  readonly allowTimeoutOverride: boolean;
  /** Always > 0. */
  readonly maxQueueSize: number;
}

export interface BatchPolicy {
  /** Where the policy came from: the model's dynamic_batching block, the server default, or no merging. */
  readonly source: 'config' | 'default' | 'unbatched';
  /** The model's max_batch_size: a request with more rows is refused (INVALID_INPUT); 0 = the model does not batch. */
  readonly modelMaxBatchSize: number;
  /** Most rows in one merged execution (a larger request still runs, alone); 0 = requests are never merged. */
  readonly maxBatchSize: number;
  /** Ascending, each ≤ maxBatchSize; empty when requests are never merged. */
  readonly preferredBatchSizes: readonly number[];
  /** How long the oldest request of a forming batch may wait for more rows. */
  readonly maxQueueDelayUs: number;
  /** Answer requests in the order they arrived, even when a later batch finishes first. */
  readonly preserveOrdering: boolean;
  /** Queue policy per priority level: index 0 is level 1 (the highest). At least one level. */
  readonly levels: readonly ResolvedQueuePolicy[];
  /** 1-based level for requests that name none (or an invalid one). */
  readonly defaultPriorityLevel: number;
}

function queuePolicy(p: QueuePolicy | undefined, defaults: BatchingDefaults): ResolvedQueuePolicy {
  return {
    timeoutAction: p?.timeoutAction ?? 'REJECT',
    defaultTimeoutUs: p?.defaultTimeoutMicroseconds ?? 0,
    allowTimeoutOverride: p?.allowTimeoutOverride ?? false,
    maxQueueSize: p && p.maxQueueSize > 0 ? p.maxQueueSize : defaults.maxQueueSize,
  };
}

/**
 * @param configured whether the model's own config.pbtxt has a `dynamic_batching`
 *   block (the empty one ONNX auto-complete adds does not count: nobody tuned it).
 */
export function resolveBatchPolicy(config: ModelConfig, configured: boolean, defaults: BatchingDefaults): BatchPolicy {
  const block = configured ? config.dynamicBatching : undefined;
  const levelCount = Math.max(1, block?.priorityLevels ?? 0);
  const levels = Array.from({ length: levelCount }, (_, i) => queuePolicy(block?.priorityQueuePolicy[String(i + 1)] ?? block?.defaultQueuePolicy, defaults));
  const defaultPriorityLevel = block && block.priorityLevels > 0 ? block.defaultPriorityLevel : 1;
  const common = { levels, defaultPriorityLevel, preserveOrdering: block?.preserveOrdering ?? false, modelMaxBatchSize: Math.max(0, config.maxBatchSize) };

  if (config.maxBatchSize <= 0 || !defaults.enabled) {
    return { ...common, source: 'unbatched', maxBatchSize: 0, preferredBatchSizes: [], maxQueueDelayUs: 0 };
  }
  if (block) {
    const preferred = block.preferredBatchSize.length > 0 ? block.preferredBatchSize : [config.maxBatchSize];
    return {
      ...common,
      source: 'config',
      maxBatchSize: config.maxBatchSize,
      preferredBatchSizes: [...new Set(preferred)].sort((a, b) => a - b),
      maxQueueDelayUs: block.maxQueueDelayMicroseconds,
    };
  }
  const rows = Math.min(config.maxBatchSize, defaults.maxBatchSize ?? config.maxBatchSize);
  return { ...common, source: 'default', maxBatchSize: rows, preferredBatchSizes: [rows], maxQueueDelayUs: defaults.maxQueueDelayUs };
}

/**
 * Instances (sessions) a model asks for: the sum over its instance groups of
 * `count`, times the GPUs a KIND_GPU group lists. A count of 0 means "not
 * given": Triton's onnxruntime default is 2 for a CPU group and 1 otherwise.
 * `onCpu` is where the model's sessions really run (KIND_AUTO resolved).
 */
export function requestedInstances(groups: readonly InstanceGroupConfig[], onCpu: boolean): number {
  if (groups.length === 0) return 1;
  let total = 0;
  for (const g of groups) {
    const cpu = g.kind === 'KIND_CPU' || (g.kind !== 'KIND_GPU' && onCpu);
    const count = g.count > 0 ? g.count : cpu ? 2 : 1;
    total += cpu ? count : count * Math.max(1, g.gpus.length);
  }
  return Math.max(1, total);
}

/**
 * The env defaults (config/server-config.ts) for callers without a server
 * config, e.g. `onnx-mme validate`, whose sessions never serve a request.
 */
export const DEFAULT_BATCHING: BatchingDefaults = Object.freeze({
  enabled: true,
  maxQueueDelayUs: 0,
  maxBatchSize: undefined,
  maxQueueSize: 1024,
  autoCompleteMaxBatchSize: DEFAULT_MAX_BATCH_SIZE,
});
