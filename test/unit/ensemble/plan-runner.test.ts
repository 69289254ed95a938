/**
 * @module test/unit/ensemble/plan-runner
 * runPlan over fake schedulers (functions over typed arrays that record their
 * calls): dataflow results, concurrency of independent steps (proved with
 * deferred promises, no sleeps), running only what the requested outputs
 * need, error propagation with step and model named, no unhandled rejection
 * when a step fails while another runs, and the single-model pass-through.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { CancelSource, type Cancellation } from '../../../src/cancellation.js';
import { modelConfigFromJson } from '../../../src/config/model-config.js';
import type { ModelConfig } from '../../../src/config/model-config-types.js';
import { ensemblePlan, singleModelPlan, type ExecutionPlan, type StepModel } from '../../../src/ensemble/execution-plan.js';
import { runPlan } from '../../../src/ensemble/plan-runner.js';
import { ServingError } from '../../../src/errors.js';
import type { Tensor } from '../../../src/protocol/tensor.js';
import type { ModelScheduler } from '../../../src/scheduler/model-scheduler.js';

// ------------------------------------------------------------------ fixtures

interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(err: unknown): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function f32(...values: number[]): Tensor {
  return { datatype: 'FP32', shape: [values.length], data: new Float32Array(values) };
}

function values(t: Tensor | undefined): number[] {
  assert.ok(t, 'tensor present');
  return Array.from(t.data as Float32Array);
}

type Compute = (inputs: ReadonlyMap<string, Tensor>, outputs: readonly string[]) => Map<string, Tensor> | Promise<Map<string, Tensor>>;

interface Call {
  readonly inputs: ReadonlyMap<string, Tensor>;
  readonly outputs: readonly string[];
  readonly cancel: Cancellation | undefined;
}

class FakeScheduler implements ModelScheduler {
  readonly calls: Call[] = [];
  /** Resolved when the first call arrives. */
  readonly started = deferred<void>();

  constructor(
    readonly name: string,
    private readonly compute: Compute,
    private readonly log: string[],
  ) {}

  async schedule(inputs: ReadonlyMap<string, Tensor>, outputNames: readonly string[], cancel?: Cancellation): Promise<Map<string, Tensor>> {
    this.calls.push({ inputs, outputs: [...outputNames], cancel });
    this.log.push(`start ${this.name}`);
    this.started.resolve();
    try {
      return await this.compute(inputs, outputNames);
    } finally {
      this.log.push(`end ${this.name}`);
    }
  }

  async close(): Promise<void> {}
}

/** Elementwise map of one input into the requested outputs. */
function unary(input: string, fns: Record<string, (x: number) => number>): Compute {
  return (inputs, outputs) => {
    const x = inputs.get(input);
    assert.ok(x, `input ${input}`);
    const src = x.data as Float32Array;
    return new Map(outputs.map((o) => [o, { datatype: 'FP32', shape: [...x.shape], data: src.map(fns[o]!) } as Tensor]));
  };
}

const addAB: Compute = (inputs) => {
  const a = inputs.get('a')!.data as Float32Array;
  const b = inputs.get('b')!.data as Float32Array;
  return new Map([['sum', { datatype: 'FP32', shape: [a.length], data: a.map((v, i) => v + b[i]!) } as Tensor]]);
};

const tensorJson = (name: string, optional = false): Record<string, unknown> => ({
  name,
  data_type: 'TYPE_FP32',
  dims: [-1],
  ...(optional ? { optional: true } : {}),
});

function onnxConfig(name: string, inputs: string[], outputs: string[], optional: string[] = []): ModelConfig {
  return modelConfigFromJson(
    {
      name,
      platform: 'onnxruntime_onnx',
      max_batch_size: 0,
      input: inputs.map((i) => tensorJson(i, optional.includes(i))),
      output: outputs.map((o) => tensorJson(o)),
    },
    { sourceName: `${name}/config.pbtxt`, directoryName: name },
  );
}

function ensembleConfig(
  inputs: string[],
  outputs: string[],
  steps: Array<[string, Record<string, string>, Record<string, string>]>,
  optional: string[] = [],
): ModelConfig {
  return modelConfigFromJson(
    {
      name: 'ens',
      platform: 'ensemble',
      max_batch_size: 0,
      input: inputs.map((i) => tensorJson(i, optional.includes(i))),
      output: outputs.map((o) => tensorJson(o)),
      ensemble_scheduling: { step: steps.map(([model_name, input_map, output_map]) => ({ model_name, model_version: -1, input_map, output_map })) },
    },
    { sourceName: 'ens/config.pbtxt', directoryName: 'ens' },
  );
}

interface Diamond {
  readonly plan: ExecutionPlan;
  readonly log: string[];
  readonly a: FakeScheduler;
  readonly b: FakeScheduler;
  readonly c: FakeScheduler;
  readonly d: FakeScheduler;
}

/**
 * A = split(IN) → P = IN + 1, Q = IN − 1; B = double(P) → BOUT; C = triple(Q) → COUT;
 * D = add(BOUT, COUT) → OUT = 5·IN − 1. Ensemble outputs: OUT and BOUT.
 */
function diamond(overrides: { b?: Compute; c?: Compute } = {}): Diamond {
  const log: string[] = [];
  const a = new FakeScheduler('A', unary('x', { p: (v) => v + 1, q: (v) => v - 1 }), log);
  const b = new FakeScheduler('B', overrides.b ?? unary('x', { y: (v) => 2 * v }), log);
  const c = new FakeScheduler('C', overrides.c ?? unary('x', { y: (v) => 3 * v }), log);
  const d = new FakeScheduler('D', addAB, log);
  const models = new Map<string, StepModel>([
    ['split', { config: onnxConfig('split', ['x'], ['p', 'q']), version: 1, scheduler: a }],
    ['double', { config: onnxConfig('double', ['x'], ['y']), version: 1, scheduler: b }],
    ['triple', { config: onnxConfig('triple', ['x'], ['y']), version: 1, scheduler: c }],
    ['add', { config: onnxConfig('add', ['a', 'b'], ['sum']), version: 1, scheduler: d }],
  ]);
  const config = ensembleConfig(
    ['IN'],
    ['OUT', 'BOUT'],
    [
      ['split', { x: 'IN' }, { p: 'P', q: 'Q' }],
      ['double', { x: 'P' }, { y: 'BOUT' }],
      ['triple', { x: 'Q' }, { y: 'COUT' }],
      ['add', { a: 'BOUT', b: 'COUT' }, { sum: 'OUT' }],
    ],
  );
  const plan = ensemblePlan(config, (name) => models.get(name));
  return { plan, log, a, b, c, d };
}

// ------------------------------------------------------------------ tests

describe('runPlan: ensembles', () => {
  test('a diamond gives the right result and feeds each step under its own input names', async () => {
    const { plan, a, b, c, d } = diamond();
    const out = await runPlan(plan, new Map([['IN', f32(1, 2, 3)]]), ['OUT']);
    assert.deepEqual([...out.keys()], ['OUT']);
    assert.deepEqual(values(out.get('OUT')), [4, 9, 14]);
    assert.deepEqual([...a.calls[0]!.inputs.keys()], ['x']);
    assert.deepEqual(values(b.calls[0]!.inputs.get('x')), [2, 3, 4]);
    assert.deepEqual(values(c.calls[0]!.inputs.get('x')), [0, 1, 2]);
    assert.deepEqual([...d.calls[0]!.inputs.keys()].sort(), ['a', 'b']);
    assert.deepEqual(values(d.calls[0]!.inputs.get('a')), [4, 6, 8]);
    assert.deepEqual(values(d.calls[0]!.inputs.get('b')), [0, 3, 6]);
    for (const s of [a, b, c, d]) assert.equal(s.calls.length, 1, s.name);
  });

  test('several requested outputs come back in the requested order', async () => {
    const { plan } = diamond();
    const out = await runPlan(plan, new Map([['IN', f32(1)]]), ['BOUT', 'OUT']);
    assert.deepEqual([...out.keys()], ['BOUT', 'OUT']);
    assert.deepEqual(values(out.get('BOUT')), [4]);
    assert.deepEqual(values(out.get('OUT')), [4]);
  });

  test('B and C run concurrently: both start before either finishes (deferred promises, no sleeps)', { timeout: 10_000 }, async () => {
    const bDone = deferred<Map<string, Tensor>>();
    const cDone = deferred<Map<string, Tensor>>();
    const { plan, log, b, c } = diamond({ b: () => bDone.promise, c: () => cDone.promise });
    const run = runPlan(plan, new Map([['IN', f32(1, 2)]]), ['OUT']);
    // If the runner ran B and C one after the other, cStarted would never resolve while B is held.
    await Promise.all([b.started.promise, c.started.promise]);
    assert.deepEqual(log.slice(0, 2), ['start A', 'end A']);
    assert.deepEqual(log.slice(2).sort(), ['start B', 'start C']);
    // Finish C first, then B: D waits for both.
    cDone.resolve(new Map([['y', f32(0, 3)]]));
    await tick();
    assert.equal(log.includes('start D'), false, 'D must wait for B');
    bDone.resolve(new Map([['y', f32(4, 6)]]));
    const out = await run;
    assert.deepEqual(values(out.get('OUT')), [4, 9]);
    assert.deepEqual(log.slice(4), ['end C', 'end B', 'start D', 'end D']);
  });

  test('only the steps needed for the requested outputs run, each asked only for consumed outputs', async () => {
    const { plan, a, b, c, d } = diamond();
    const out = await runPlan(plan, new Map([['IN', f32(5)]]), ['BOUT']);
    assert.deepEqual([...out.keys()], ['BOUT']);
    assert.deepEqual(values(out.get('BOUT')), [12]);
    assert.equal(c.calls.length, 0);
    assert.equal(d.calls.length, 0);
    assert.deepEqual(a.calls[0]!.outputs, ['p']);
    assert.deepEqual(b.calls[0]!.outputs, ['y']);
  });

  test('for the full diamond, A is asked for both of its outputs', async () => {
    const { plan, a } = diamond();
    await runPlan(plan, new Map([['IN', f32(5)]]), ['OUT']);
    assert.deepEqual([...a.calls[0]!.outputs].sort(), ['p', 'q']);
  });

  test('the cancellation reaches every step', async () => {
    const { plan, a, b, c, d } = diamond();
    const cancel = new CancelSource();
    await runPlan(plan, new Map([['IN', f32(1)]]), ['OUT'], cancel);
    for (const s of [a, b, c, d]) assert.equal(s.calls[0]!.cancel, cancel, s.name);
  });

  test('a failing step fails the request: code and details kept, step index and model named', async () => {
    const original = new ServingError('INSUFFICIENT_MEMORY', "model 'double': out of memory while running: OOM", {
      model: 'double',
      details: { bytes: 10 },
    });
    const { plan, d } = diamond({
      b: () => {
        throw original;
      },
    });
    await assert.rejects(runPlan(plan, new Map([['IN', f32(1)]]), ['OUT']), (err: unknown) => {
      assert.ok(err instanceof ServingError);
      assert.equal(err.code, 'INSUFFICIENT_MEMORY');
      assert.equal(err.message, "ensemble 'ens' step 1 (model 'double'): model 'double': out of memory while running: OOM");
      assert.equal(err.model, 'double');
      assert.deepEqual(err.details, { bytes: 10 });
      assert.equal(err.cause, original);
      return true;
    });
    assert.equal(d.calls.length, 0);
  });

  test('a failing step with a plain Error becomes INTERNAL naming the step and model', async () => {
    const { plan } = diamond({
      c: () => {
        throw new Error('boom');
      },
    });
    await assert.rejects(runPlan(plan, new Map([['IN', f32(1)]]), ['OUT']), (err: unknown) => {
      assert.ok(err instanceof ServingError);
      assert.equal(err.code, 'INTERNAL');
      assert.equal(err.message, "ensemble 'ens' step 2 (model 'triple'): model 'triple': boom");
      assert.equal(err.model, 'triple');
      return true;
    });
  });

  test('a step failing while another is still running: the request fails at once, no unhandled rejection', { timeout: 10_000 }, async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const cDone = deferred<Map<string, Tensor>>();
      const bFail = deferred<Map<string, Tensor>>();
      const { plan, log, c, d } = diamond({ b: () => bFail.promise, c: () => cDone.promise });
      const run = runPlan(plan, new Map([['IN', f32(1)]]), ['OUT']);
      await c.started.promise;
      bFail.reject(new ServingError('TIMEOUT', "model 'double': deadline passed", { model: 'double' }));
      await assert.rejects(run, (err: unknown) => {
        assert.ok(err instanceof ServingError);
        assert.equal(err.code, 'TIMEOUT');
        assert.equal(err.message, "ensemble 'ens' step 1 (model 'double'): model 'double': deadline passed");
        return true;
      });
      // C is still running when the request has already failed.
      assert.equal(log.includes('end C'), false);
      // Now C fails too, after nobody awaits it any more.
      cDone.reject(new Error('late failure'));
      for (let i = 0; i < 5; i++) await tick();
      assert.equal(log.includes('end C'), true);
      assert.equal(d.calls.length, 0);
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  test('a step that returns without a mapped output makes its consumers unrunnable: INTERNAL', async () => {
    const { plan } = diamond({ c: () => new Map() });
    await assert.rejects(runPlan(plan, new Map([['IN', f32(1)]]), ['OUT']), (err: unknown) => {
      assert.ok(err instanceof ServingError);
      assert.equal(err.code, 'INTERNAL');
      assert.equal(err.message, "ensemble 'ens': steps 3 can never run");
      return true;
    });
  });

  test('a requested output the steps did not produce is INTERNAL', async () => {
    const { plan } = diamond({ b: () => new Map() });
    await assert.rejects(runPlan(plan, new Map([['IN', f32(1)]]), ['BOUT']), (err: unknown) => {
      assert.ok(err instanceof ServingError);
      assert.equal(err.code, 'INTERNAL');
      assert.equal(err.message, "model 'ens': output 'BOUT' was not produced");
      return true;
    });
  });

  test('an optional ensemble input that the request omits is simply not fed', async () => {
    const log: string[] = [];
    const masked = new FakeScheduler(
      'M',
      (inputs) => {
        const x = inputs.get('x')!.data as Float32Array;
        const mask = inputs.get('mask')?.data as Float32Array | undefined;
        return new Map([['y', { datatype: 'FP32', shape: [x.length], data: x.map((v, i) => (mask ? v * mask[i]! : v)) } as Tensor]]);
      },
      log,
    );
    const config = ensembleConfig(['IN', 'MASK'], ['OUT'], [['masked', { x: 'IN', mask: 'MASK' }, { y: 'OUT' }]], ['MASK']);
    const plan = ensemblePlan(config, () => ({ config: onnxConfig('masked', ['x', 'mask'], ['y'], ['mask']), version: 1, scheduler: masked }));

    const without = await runPlan(plan, new Map([['IN', f32(2, 3)]]), ['OUT']);
    assert.deepEqual(values(without.get('OUT')), [2, 3]);
    assert.deepEqual([...masked.calls[0]!.inputs.keys()], ['x']);

    const withMask = await runPlan(
      plan,
      new Map([
        ['IN', f32(2, 3)],
        ['MASK', f32(0, 1)],
      ]),
      ['OUT'],
    );
    assert.deepEqual(values(withMask.get('OUT')), [0, 3]);
    assert.deepEqual([...masked.calls[1]!.inputs.keys()].sort(), ['mask', 'x']);
  });
});

describe('runPlan: single model', () => {
  function single(compute: Compute): { plan: ExecutionPlan; scheduler: FakeScheduler } {
    const scheduler = new FakeScheduler('m', compute, []);
    const plan = singleModelPlan('m', { config: onnxConfig('m', ['a', 'b'], ['sum', 'diff']), version: 2, scheduler });
    return { plan, scheduler };
  }

  test('requested outputs are passed through to the model and back', async () => {
    const { plan, scheduler } = single((inputs, outputs) => {
      const a = inputs.get('a')!.data as Float32Array;
      const b = inputs.get('b')!.data as Float32Array;
      const all = new Map<string, Tensor>([
        ['sum', f32(...a.map((v, i) => v + b[i]!))],
        ['diff', f32(...a.map((v, i) => v - b[i]!))],
      ]);
      return new Map(outputs.map((o) => [o, all.get(o)!]));
    });
    const a = f32(5, 7);
    const out = await runPlan(
      plan,
      new Map([
        ['a', a],
        ['b', f32(1, 2)],
      ]),
      ['diff'],
    );
    assert.deepEqual([...out.keys()], ['diff']);
    assert.deepEqual(values(out.get('diff')), [4, 5]);
    assert.deepEqual(scheduler.calls[0]!.outputs, ['diff']);
    assert.deepEqual([...scheduler.calls[0]!.inputs.keys()], ['a', 'b']);
    // Request tensors reach the model as they are: no copy.
    assert.equal(scheduler.calls[0]!.inputs.get('a'), a);

    const both = await runPlan(
      plan,
      new Map([
        ['a', f32(1)],
        ['b', f32(1)],
      ]),
      ['sum', 'diff'],
    );
    assert.deepEqual([...both.keys()], ['sum', 'diff']);
    assert.deepEqual([...scheduler.calls[1]!.outputs].sort(), ['diff', 'sum']);
  });

  test("a single model's error is passed through unchanged", async () => {
    const original = new ServingError('INVALID_INPUT', "model 'm': bad shape", { model: 'm' });
    const { plan } = single(() => {
      throw original;
    });
    await assert.rejects(
      runPlan(
        plan,
        new Map([
          ['a', f32(1)],
          ['b', f32(1)],
        ]),
        ['sum'],
      ),
      (err: unknown) => err === original,
    );
  });

  test("a single model's plain Error becomes INTERNAL naming the model", async () => {
    const { plan } = single(() => {
      throw new Error('native crash');
    });
    await assert.rejects(
      runPlan(
        plan,
        new Map([
          ['a', f32(1)],
          ['b', f32(1)],
        ]),
        ['sum'],
      ),
      (err: unknown) => {
        assert.ok(err instanceof ServingError);
        assert.equal(err.code, 'INTERNAL');
        assert.equal(err.message, "model 'm': native crash");
        assert.equal(err.model, 'm');
        return true;
      },
    );
  });
});
