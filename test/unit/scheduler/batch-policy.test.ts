/**
 * @module test/unit/scheduler/batch-policy
 * How a model's scheduling is resolved from config.pbtxt (through the real
 * parser) and the server defaults; the instance count from instance_group;
 * the request parameters `priority` / `timeout`; and the batching env vars.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadServerConfig } from '../../../src/config/server-config.js';
import { DEFAULT_BATCHING, requestedInstances, resolveBatchPolicy } from '../../../src/scheduler/batch-policy.js';
import { scheduleOptionsFrom } from '../../../src/scheduler/schedule-options.js';
import { isServingError } from '../../support/serving-error.js';
import { batchingConfig, config } from './fakes.js';

const UNBATCHED =
  'max_batch_size: 0\nplatform: "onnxruntime_onnx"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]\noutput [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]\n';

describe('resolveBatchPolicy', () => {
  test('no dynamic_batching block: the no-tuning default, all rows up to max_batch_size, no delay, bounded queue', () => {
    const p = resolveBatchPolicy(batchingConfig(16), false, DEFAULT_BATCHING);
    assert.equal(p.source, 'default');
    assert.equal(p.maxBatchSize, 16);
    assert.deepEqual(p.preferredBatchSizes, [16]);
    assert.equal(p.maxQueueDelayUs, 0);
    assert.equal(p.preserveOrdering, false);
    assert.deepEqual(p.levels, [{ timeoutAction: 'REJECT', defaultTimeoutUs: 0, allowTimeoutOverride: false, maxQueueSize: 1024 }]);
  });

  test('server defaults: delay, a row cap below max_batch_size (never above), queue size', () => {
    const defaults = { ...DEFAULT_BATCHING, maxQueueDelayUs: 2000, maxBatchSize: 4, maxQueueSize: 7 };
    const p = resolveBatchPolicy(batchingConfig(16), false, defaults);
    assert.deepEqual([p.maxBatchSize, p.preferredBatchSizes, p.maxQueueDelayUs, p.levels[0]!.maxQueueSize, p.modelMaxBatchSize], [4, [4], 2000, 7, 16]);
    assert.equal(resolveBatchPolicy(batchingConfig(2), false, defaults).maxBatchSize, 2);
  });

  test('the empty block ONNX auto-complete adds is not tuning: it still gets the server defaults', () => {
    const p = resolveBatchPolicy(batchingConfig(8, 'dynamic_batching { }'), false, { ...DEFAULT_BATCHING, maxQueueDelayUs: 300 });
    assert.equal(p.source, 'default');
    assert.equal(p.maxQueueDelayUs, 300);
  });

  test("a dynamic_batching block in config.pbtxt is Triton's knobs exactly; max_queue_size 0 becomes the server bound", () => {
    const cfg = batchingConfig(
      8,
      `dynamic_batching {
         preferred_batch_size: [ 8, 2, 4 ]
         max_queue_delay_microseconds: 100
         default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5000 allow_timeout_override: true }
       }`,
    );
    const p = resolveBatchPolicy(cfg, true, { ...DEFAULT_BATCHING, maxQueueDelayUs: 9999, maxBatchSize: 1 });
    assert.equal(p.source, 'config');
    assert.equal(p.maxBatchSize, 8, 'MME_BATCH_MAX_SIZE does not touch a tuned model');
    assert.deepEqual(p.preferredBatchSizes, [2, 4, 8]);
    assert.equal(p.maxQueueDelayUs, 100);
    assert.deepEqual(p.levels, [{ timeoutAction: 'DELAY', defaultTimeoutUs: 5000, allowTimeoutOverride: true, maxQueueSize: 1024 }]);
  });

  test('an empty preferred_batch_size means [max_batch_size]', () => {
    assert.deepEqual(
      resolveBatchPolicy(batchingConfig(6, 'dynamic_batching { max_queue_delay_microseconds: 10 }'), true, DEFAULT_BATCHING).preferredBatchSizes,
      [6],
    );
  });

  test('priority levels: per-level policies, the default level, others from default_queue_policy', () => {
    const cfg = batchingConfig(
      4,
      `dynamic_batching {
         priority_levels: 3 default_priority_level: 2
         default_queue_policy { max_queue_size: 5 }
         priority_queue_policy { key: 1 value: { max_queue_size: 9 default_timeout_microseconds: 10 } }
       }`,
    );
    const p = resolveBatchPolicy(cfg, true, DEFAULT_BATCHING);
    assert.equal(p.defaultPriorityLevel, 2);
    assert.deepEqual(
      p.levels.map((l) => [l.maxQueueSize, l.defaultTimeoutUs]),
      [
        [9, 10],
        [5, 0],
        [5, 0],
      ],
    );
  });

  test('max_batch_size 0, or MME_DYNAMIC_BATCHING=false: never merged, no delay, queue policy kept', () => {
    const a = resolveBatchPolicy(config(UNBATCHED), false, DEFAULT_BATCHING);
    assert.deepEqual([a.source, a.maxBatchSize, a.modelMaxBatchSize, a.maxQueueDelayUs], ['unbatched', 0, 0, 0]);
    const cfg = batchingConfig(8, 'dynamic_batching { max_queue_delay_microseconds: 500 default_queue_policy { max_queue_size: 3 } }');
    const b = resolveBatchPolicy(cfg, true, { ...DEFAULT_BATCHING, enabled: false });
    assert.deepEqual([b.source, b.maxBatchSize, b.modelMaxBatchSize, b.maxQueueDelayUs, b.levels[0]!.maxQueueSize], ['unbatched', 0, 8, 0, 3]);
  });
});

describe('requestedInstances', () => {
  const group = (kind: 'KIND_AUTO' | 'KIND_CPU' | 'KIND_GPU', count: number, gpus: number[] = []) => ({ name: 'g', kind, count, gpus });

  test('no instance_group (normalised to one KIND_AUTO of count 1): one', () => {
    assert.equal(requestedInstances(config(UNBATCHED).instanceGroup, true), 1);
    assert.equal(requestedInstances([], true), 1);
  });

  test('counts add up over groups; a GPU group counts once per listed GPU', () => {
    assert.equal(requestedInstances([group('KIND_CPU', 3)], true), 3);
    assert.equal(requestedInstances([group('KIND_GPU', 2, [0, 1]), group('KIND_GPU', 1)], false), 5);
    assert.equal(requestedInstances([group('KIND_CPU', 1), group('KIND_AUTO', 2)], true), 3);
  });

  test("count not given: Triton's onnxruntime default, 2 on CPU, 1 on GPU", () => {
    assert.equal(requestedInstances([group('KIND_CPU', 0)], false), 2);
    assert.equal(requestedInstances([group('KIND_AUTO', 0)], true), 2);
    assert.equal(requestedInstances([group('KIND_AUTO', 0)], false), 1);
  });

  test('parsed from config.pbtxt', () => {
    const cfg = config(`${UNBATCHED}instance_group [ { count: 2 kind: KIND_CPU }, { kind: KIND_CPU } ]\n`);
    assert.equal(requestedInstances(cfg.instanceGroup, true), 4);
  });
});

describe('request parameters priority and timeout', () => {
  test('non-negative integers pass through; absent ones stay absent', () => {
    assert.deepEqual(scheduleOptionsFrom({ priority: 2, timeout: 1500, other: 'x' }, 'm'), { priority: 2, timeoutUs: 1500 });
    assert.deepEqual(scheduleOptionsFrom({}, 'm'), {});
  });

  test('anything else is INVALID_REQUEST naming the model and the parameter', () => {
    assert.throws(
      () => scheduleOptionsFrom({ priority: -1 }, 'm'),
      isServingError('INVALID_REQUEST', /model 'm': request parameter 'priority' must be a non-negative integer, got -1/),
    );
    assert.throws(() => scheduleOptionsFrom({ timeout: '10' }, 'm'), isServingError('INVALID_REQUEST', /'timeout'.*got "10"/));
    assert.throws(() => scheduleOptionsFrom({ timeout: 1.5 }, 'm'), isServingError('INVALID_REQUEST', /'timeout'/));
  });
});

describe('batching environment variables', () => {
  test('defaults: batching on, no delay, no row cap, 1024 waiting requests per model', () => {
    const c = loadServerConfig({});
    assert.deepEqual([c.dynamicBatching, c.batchMaxDelayUs, c.batchMaxSize, c.maxQueueSize], [true, 0, undefined, 1024]);
  });

  test('MME_* values', () => {
    const c = loadServerConfig({ MME_DYNAMIC_BATCHING: 'false', MME_BATCH_MAX_DELAY_US: '250', MME_BATCH_MAX_SIZE: '16', MME_MAX_QUEUE_SIZE: '8' });
    assert.deepEqual([c.dynamicBatching, c.batchMaxDelayUs, c.batchMaxSize, c.maxQueueSize], [false, 250, 16, 8]);
  });

  test("TorchServe's SAGEMAKER_TS_MAX_BATCH_DELAY is milliseconds; SAGEMAKER_TS_BATCH_SIZE is the row cap; MME_* win", () => {
    const ts = loadServerConfig({ SAGEMAKER_TS_MAX_BATCH_DELAY: '5', SAGEMAKER_TS_BATCH_SIZE: '4' });
    assert.deepEqual([ts.batchMaxDelayUs, ts.batchMaxSize], [5000, 4]);
    const both = loadServerConfig({ SAGEMAKER_TS_MAX_BATCH_DELAY: '5', MME_BATCH_MAX_DELAY_US: '7', SAGEMAKER_TS_BATCH_SIZE: '4', MME_BATCH_MAX_SIZE: '3' });
    assert.deepEqual([both.batchMaxDelayUs, both.batchMaxSize], [7, 3]);
  });

  test('a TorchServe delay meant as microseconds (100000 = 100 s in ms) stops startup, as do other bad values', () => {
    assert.throws(
      () => loadServerConfig({ SAGEMAKER_TS_MAX_BATCH_DELAY: '100000', MME_MAX_QUEUE_SIZE: '0', MME_DYNAMIC_BATCHING: 'maybe', MME_BATCH_MAX_SIZE: '0' }),
      isServingError(
        'INVALID_REQUEST',
        /SAGEMAKER_TS_MAX_BATCH_DELAY must be an integer in \[0, 10000\] \(milliseconds, at most 10 s\), got '100000'.*MME_MAX_QUEUE_SIZE.*/,
      ),
    );
    assert.throws(() => loadServerConfig({ MME_DYNAMIC_BATCHING: 'maybe' }), isServingError('INVALID_REQUEST', /MME_DYNAMIC_BATCHING must be true or false/));
    assert.throws(() => loadServerConfig({ MME_BATCH_MAX_SIZE: '0' }), isServingError('INVALID_REQUEST', /MME_BATCH_MAX_SIZE must be an integer in \[1,/));
    assert.throws(() => loadServerConfig({ MME_BATCH_MAX_DELAY_US: '-1' }), isServingError('INVALID_REQUEST', /MME_BATCH_MAX_DELAY_US must be an integer/));
  });
});
