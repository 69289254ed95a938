/**
 * The server's command line (config/serve-args.ts) and the setting a listen
 * failure names (config/listen-failure.ts), including the failures a test
 * running as root cannot provoke (a privileged port).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { listenFailure } from '../../../src/config/listen-failure.js';
import { parseServeArgs } from '../../../src/config/serve-args.js';

describe('parseServeArgs', () => {
  test('no arguments runs; --help or -h alone is help', () => {
    assert.deepEqual(parseServeArgs([]), { kind: 'run' });
    assert.deepEqual(parseServeArgs(['--help']), { kind: 'help' });
    assert.deepEqual(parseServeArgs(['-h']), { kind: 'help' });
  });

  test('an option people try names the variable that does it, with their value', () => {
    for (const [args, setting, example] of [
      [['--port', '9000'], 'SAGEMAKER_BIND_TO_PORT', 'SAGEMAKER_BIND_TO_PORT=9000 ./serve'],
      [['-p', '9000'], 'SAGEMAKER_BIND_TO_PORT', 'SAGEMAKER_BIND_TO_PORT=9000 ./serve'],
      [['--host=127.0.0.1'], 'MME_HOST', 'MME_HOST=127.0.0.1 ./serve'],
      [['--model-repository', '/models'], 'MME_MODEL_SOURCE', 'MME_MODEL_SOURCE=/models ./serve'],
      [['--grpc-port'], 'MME_GRPC_PORT', 'MME_GRPC_PORT=… ./serve'],
    ] as const) {
      const r = parseServeArgs(args);
      assert.equal(r.kind, 'refused');
      assert.equal(r.kind === 'refused' && r.setting, setting, args.join(' '));
      assert.ok(r.kind === 'refused' && r.message.includes(example), `${args.join(' ')}: ${r.kind === 'refused' ? r.message : ''}`);
    }
  });

  test('anything else is refused naming it; --help with more is refused too (nothing ignored)', () => {
    for (const args of [['--verbose'], ['serve'], ['--help', '--port', '1']]) {
      const r = parseServeArgs(args);
      assert.equal(r.kind, 'refused', args.join(' '));
      assert.ok(r.kind === 'refused' && r.message.includes(`'${args[0]}'`));
    }
  });
});

describe('listenFailure', () => {
  const errno = (code: string): Error => Object.assign(new Error(`listen ${code}`), { code });

  test('in use and privileged name the listener port setting; an address not of this host names MME_HOST', () => {
    assert.equal(listenFailure(errno('EADDRINUSE'), 'HTTP', 'SAGEMAKER_BIND_TO_PORT', '0.0.0.0', 8080).setting, 'SAGEMAKER_BIND_TO_PORT');
    const privileged = listenFailure(errno('EACCES'), 'HTTP', 'SAGEMAKER_BIND_TO_PORT', '0.0.0.0', 80);
    assert.equal(privileged.setting, 'SAGEMAKER_BIND_TO_PORT');
    assert.match(privileged.message, /port 80 needs privileges this process lacks \(EACCES\): set SAGEMAKER_BIND_TO_PORT to a port above 1023/);
    assert.equal(listenFailure(errno('EADDRNOTAVAIL'), 'gRPC', 'MME_GRPC_PORT', '10.9.9.9', 8001).setting, 'MME_HOST');
  });

  test("gRPC's errors carry the errno in their message: still recognised", () => {
    const grpc = new Error('No address added out of total 1 resolved errors: [listen EADDRINUSE: address already in use 0.0.0.0:8001]');
    const e = listenFailure(grpc, 'gRPC', 'MME_GRPC_PORT', '0.0.0.0', 8001);
    assert.equal(e.setting, 'MME_GRPC_PORT');
    assert.match(e.message, /the gRPC port 8001 is already in use/);
  });

  test('an unknown failure still names the port setting, with its own message', () => {
    const e = listenFailure(new Error('something odd'), 'metrics', 'MME_METRICS_PORT', '0.0.0.0', 9464);
    assert.equal(e.setting, 'MME_METRICS_PORT');
    assert.match(e.message, /something odd/);
  });
});
