/**
 * InferenceService on a registry built from fakes (test/unit/registry/fake-loader.ts):
 * the use cases without a server, files or onnxruntime.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { silentLogger } from '../../../src/observability/logger.js';
import type { InferRequest } from '../../../src/protocol/infer-types.js';
import type { Tensor } from '../../../src/protocol/tensor.js';
import type { ModelScheduler } from '../../../src/scheduler/model-scheduler.js';
import type { InferenceCall } from '../../../src/service/inference-call.js';
import { InferenceService, type ModelHandle } from '../../../src/service/inference-service.js';
import { RequestStats } from '../../../src/service/request-stats.js';
import { isServingError } from '../../support/serving-error.js';
import { tempDir } from '../../support/temp-dir.js';
import { deferred, registryFixture, settle } from '../registry/fake-loader.js';

function request(values: number[]): InferRequest {
  const input: Tensor = { datatype: 'FP32', shape: [1, values.length], data: Float32Array.from(values) };
  return { id: 'r1', inputs: new Map([['INPUT0', input]]), outputs: undefined, parameters: {} };
}

/** The InferenceCall an edge builds: the request decoded, the stats started. */
function call(handle: ModelHandle, req: InferRequest, reachedModel?: () => void): InferenceCall {
  const arrival = reachedModel === undefined ? undefined : { arrived: reachedModel };
  return { handle, request: req, version: undefined, cancel: undefined, log: silentLogger(), arrival, oneOutput: undefined, stats: new RequestStats() };
}

function serviceFixture(maxInflight = 8): ReturnType<typeof registryFixture> & { service: InferenceService } {
  const fixture = registryFixture({ budgetBytes: 20 });
  return { ...fixture, service: new InferenceService({ registry: fixture.registry, metrics: fixture.metrics, maxInflight }) };
}

describe('InferenceService with a fake loader', () => {
  test('infer loads the target once, runs its plan, answers, and lets go of the lease', async () => {
    const { service, registry, loader } = serviceFixture();
    const answer = await service.infer(call(service.resolve({ kind: 'target', target: 'a' }), request([1, 2, 3])));
    assert.equal(answer.modelName, 'a');
    assert.equal(answer.modelVersion, '1');
    assert.deepEqual([...(answer.outputs.get('OUTPUT0')!.data as Float32Array)], [2, 4, 6]);
    await service.infer(call(service.resolve({ kind: 'target', target: 'a' }), request([1])));
    assert.equal(loader.loadsOf('a').length, 1, 'the second request finds it resident');
    assert.equal(service.inflightCount, 0);
    // Nothing holds it: an unload completes at once.
    await registry.resolve({ kind: 'target', target: 'a' }).unload();
  });

  test('a request that fails validation is refused before it runs, and releases its lease', async () => {
    const { service, registry, loader } = serviceFixture();
    const bad: InferRequest = { ...request([1]), inputs: new Map([['NOPE', { datatype: 'FP32', shape: [1, 1], data: Float32Array.from([1]) }]]) };
    await assert.rejects(
      service.infer(call(service.resolve({ kind: 'target', target: 'a' }), bad)),
      isServingError('INVALID_INPUT', /model 'a': unexpected inference input 'NOPE'/),
    );
    const pkg = await loader.calls[0]!.result;
    assert.equal(pkg.scheduler.runs, 0);
    await registry.resolve({ kind: 'target', target: 'a' }).unload();
    assert.equal(pkg.released(), true);
  });

  test('past maxInflight requests get OVERLOADED; the slots come back when they end', async () => {
    const { service, loader } = serviceFixture(1);
    (await service.infer(call(service.resolve({ kind: 'target', target: 'a' }), request([1])))).outputs;
    const pkg = await loader.calls[0]!.result;
    const gate = deferred();
    pkg.scheduler.gate = gate.promise;
    const first = service.infer(call(service.resolve({ kind: 'target', target: 'a' }), request([1])));
    await settle();
    await assert.rejects(
      service.infer(call(service.resolve({ kind: 'target', target: 'a' }), request([1]))),
      isServingError('OVERLOADED', /limit of 1 requests/),
    );
    gate.resolve();
    await first;
    await service.infer(call(service.resolve({ kind: 'target', target: 'a' }), request([1])));
  });

  test("queueOf: the entry model's scheduler queue once resident, else MME_MAX_QUEUE_SIZE; reachedModel fires as the request joins it", async () => {
    const fixture = registryFixture();
    const service = new InferenceService({ registry: fixture.registry, metrics: fixture.metrics, maxInflight: 8, maxQueueSize: 16 });
    const a = service.resolve({ kind: 'target', target: 'a' });
    assert.deepEqual(service.queueOf(a), { key: 'source:a', model: 'a', queued: 0, limit: 16 }, 'not loaded: nothing waits in it yet');
    assert.deepEqual(service.queueOf('../x'), { key: 'unresolved:../x', model: '../x', queued: 0, limit: 16 }, 'a bad target is refused later, not here');
    assert.notEqual(
      service.resolve({ kind: 'managed', name: 'a', targetHeader: undefined }).queueKey,
      a.queueKey,
      'a model SageMaker loaded as a and the target a are two queues',
    );
    let reached = 0;
    await service.infer(call(a, request([1]), () => reached++));
    assert.equal(reached, 1);
    const pkg = await fixture.loader.calls[0]!.result;
    (pkg.scheduler as ModelScheduler).queueDepth = () => ({ queued: 3, limit: 7 });
    assert.deepEqual(service.queueOf(service.resolve({ kind: 'target', target: 'a' })), { key: 'source:a', model: 'a', queued: 3, limit: 7 });
  });

  test('SageMaker management through the service: load, invoke (paging in), list, unload', async (t) => {
    const { service, loader } = serviceFixture();
    // A real directory: the registry resolves the url with realpath (the fake loader reads nothing from it).
    await service.registerModel('m', await tempDir(t), undefined);
    const answer = await service.infer(call(service.resolve({ kind: 'managed', name: 'm', targetHeader: undefined }), request([5])));
    assert.deepEqual([...(answer.outputs.get('OUTPUT0')!.data as Float32Array)], [10]);
    assert.equal(loader.loadsOf('m').length, 1);
    await service.unload(service.resolve({ kind: 'managed', name: 'm', targetHeader: undefined }));
    await assert.rejects(
      service.infer(call(service.resolve({ kind: 'managed', name: 'm', targetHeader: undefined }), request([5]))),
      isServingError('MODEL_NOT_FOUND', /'m' is not loaded/),
    );
  });
});
