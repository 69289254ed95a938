/**
 * MME_LOG_FORMAT=pretty: the server's own logger writing through the pretty
 * destination gives one readable line per entry (time, level, message, then
 * key=value fields), errors by their message, and flushes pass through.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createLogger } from '../../../src/observability/logger.js';
import { prettyDestination, prettyLine } from '../../../src/observability/pretty-log.js';
import { startSummary } from '../../../src/observability/start-summary.js';

/** A destination that keeps what it is given, with a flush that says it was called. */
function sink(): { write(s: string): void; flush(cb: (err?: Error) => void): void; written: string[]; flushed: number } {
  return {
    written: [],
    flushed: 0,
    write(s: string) {
      this.written.push(s);
    },
    flush(cb) {
      this.flushed++;
      cb();
    },
  };
}

describe('pretty log lines', () => {
  test('the logger through the pretty destination: time, padded level, message, fields; one line each', () => {
    const out = sink();
    const logger = createLogger('info', prettyDestination(out));
    logger.info({ port: 8080, source: 'file:///models', budgetFrom: 'host memory (cgroup limit or RAM)', list: ['cpu'] }, 'onnx-mme listening');
    logger.warn({ err: new Error('no route to host') }, 'something failed');
    logger.debug('not at info');
    assert.equal(out.written.length, 2);
    assert.match(
      out.written[0]!,
      /^\d\d:\d\d:\d\d\.\d{3} INFO  onnx-mme listening {2}port=8080 source=file:\/\/\/models budgetFrom="host memory \(cgroup limit or RAM\)" list=\["cpu"\]\n$/,
    );
    assert.match(out.written[1]!, /^\d\d:\d\d:\d\d\.\d{3} WARN  something failed {2}err="no route to host"\n$/);
    assert.doesNotMatch(out.written.join(''), /service=|"level"/, 'the fields every line has are in its head, not repeated');
  });

  test('colour only when asked (a terminal); a line that is not JSON passes through', () => {
    const line = JSON.stringify({ level: 'error', time: '2026-12-03T09:52:47.043Z', msg: 'x' });
    assert.equal(prettyLine(line), '09:52:47.043 ERROR x\n');
    assert.equal(prettyLine(line, true), '09:52:47.043 \u001b[31mERROR\u001b[39m x\n');
    assert.equal(prettyLine('not json'), 'not json\n');
  });

  test("logger.flush reaches the destination's flush (main.ts exits only after the last line is written)", async () => {
    const out = sink();
    const logger = createLogger('info', prettyDestination(out));
    logger.info('last words');
    await new Promise<void>((resolve) => logger.flush(() => resolve()));
    assert.equal(out.flushed, 1);
  });
});

describe('the start-up summary', () => {
  test('bytes in MiB/GiB, every listener, the source, the cache and its budget', () => {
    const text = startSummary({
      host: '0.0.0.0',
      port: 8080,
      grpcPort: 8001,
      grpcTls: true,
      metricsPort: 9464,
      source: 's3://bucket/prefix/',
      sourceKind: 's3',
      cacheDir: '/var/cache/onnx-mme',
      cacheBytes: 40 * 1024 ** 3,
      budgetBytes: 1.5 * 1024 ** 3,
      budgetFrom: 'MME_MEMORY_BUDGET_BYTES',
      runtimeWorkers: 1,
      providers: ['cuda', 'cpu'],
      gpuVisible: true,
      logLevel: 'info',
      modelControl: { mode: 'explicit', reason: 'SAGEMAKER_MULTI_MODEL=true' },
    });
    assert.equal(
      text,
      'ready: HTTP 0.0.0.0:8080, gRPC 8001 (TLS), metrics 9464; models from s3://bucket/prefix/ (downloaded on first use); cache /var/cache/onnx-mme, up to 40.0 GiB; memory budget 1.50 GiB, from MME_MEMORY_BUDGET_BYTES; 1 runtime worker (cuda, cpu); model control explicit (SAGEMAKER_MULTI_MODEL=true); log level info',
    );
  });
});
