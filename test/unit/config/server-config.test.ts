/**
 * @module test/unit/config/server-config
 * loadServerConfig: defaults, every variable, aliases, file:// URLs, all
 * problems in one error, a deep-frozen result; and docs/configuration.md documents every
 * variable SETTINGS declares.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadServerConfig, logFormatOf, PROVIDER_NAMES, SETTINGS, type ServerConfig } from '../../../src/config/server-config.js';
import { ServingError } from '../../../src/errors.js';

const MIB = 1024 * 1024;

function load(env: Record<string, string>): ServerConfig {
  return loadServerConfig(env);
}

/** The single configuration error for `env`; checks its code and returns its message. */
function configError(env: Record<string, string>): string {
  try {
    load(env);
  } catch (err) {
    assert.ok(err instanceof ServingError, `expected ServingError, got ${String(err)}`);
    assert.equal(err.code, 'INVALID_REQUEST');
    assert.ok(err.message.startsWith('invalid server configuration: '), err.message);
    return err.message;
  }
  assert.fail(`no error for ${JSON.stringify(env)}`);
}

function expectProblem(env: Record<string, string>, problem: string): void {
  assert.equal(configError(env), `invalid server configuration: ${problem}`);
}

/**
 * An integer setting: unset gives `byDefault`; each of `taken` is read as written; each of `refused` stops start-up
 * naming the variable and its range.
 */
function checkIntegerSetting(
  variable: string,
  key: keyof ServerConfig,
  { byDefault, taken, range, refused }: { byDefault: number; taken: readonly number[]; range: readonly [number, number]; refused: readonly string[] },
): void {
  assert.equal(load({})[key], byDefault);
  for (const value of taken) assert.equal(load({ [variable]: String(value) })[key], value);
  for (const bad of refused) expectProblem({ [variable]: bad }, `${variable} must be an integer in [${range[0]}, ${range[1]}], got '${bad}'`);
}

describe('loadServerConfig: defaults', () => {
  test('an empty environment gives every documented default', () => {
    const config = load({});
    const expected = {
      host: '0.0.0.0',
      port: 8080,
      multiModel: false,
      bodyLimitBytes: 6 * MIB,
      modelSource: '/opt/ml/model',
      cacheDir: path.join(os.tmpdir(), 'onnx-mme-cache'),
      defaultModel: undefined,
      executionProviders: undefined,
      logLevel: 'info',
      archiveMaxBytes: 17179869184,
      archiveMaxEntries: 10000,
      archiveMaxRatio: 200,
      shutdownTimeoutMs: 25000,
      maxInflightRequests: 1024,
    };
    // Compare the settings this test knows; settings added later have their own tests.
    const known = Object.fromEntries(Object.keys(expected).map((k) => [k, config[k as keyof ServerConfig]]));
    assert.deepEqual(known, expected);
  });

  test('SETTINGS declares each ServerConfig key once, with at least one env name', () => {
    const keys = SETTINGS.map((s) => s.key);
    // environmentNotices is derived from the whole environment (config/env-notices.ts), modelSourceOptional from
    // SAGEMAKER_MULTI_MODEL: neither is a setting of its own.
    assert.deepEqual(
      [...keys].sort(),
      Object.keys(load({}))
        .filter((k) => k !== 'environmentNotices' && k !== 'modelSourceOptional')
        .sort(),
    );
    assert.equal(new Set(keys).size, keys.length);
    for (const s of SETTINGS) assert.ok(s.env.length > 0 && s.description.length > 0, s.key);
  });

  test('unrelated variables change nothing; an unknown MME_* one is only named in a notice', () => {
    const { environmentNotices, ...rest } = load({ PATH: '/bin', MME_UNKNOWN: 'x' });
    const { environmentNotices: none, ...defaults } = load({});
    assert.deepEqual(rest, defaults);
    assert.deepEqual(none, []);
    assert.deepEqual(
      environmentNotices.map((n) => [n.name, n.level]),
      [['MME_UNKNOWN', 'warn']],
    );
  });
});

describe('loadServerConfig: each variable', () => {
  test('MME_SHARED_TURN_REQUESTS: 4 by default, 1 to 16, anything else stops start-up naming it', () => {
    checkIntegerSetting('MME_SHARED_TURN_REQUESTS', 'sharedTurnRequests', { byDefault: 4, taken: [16, 1], range: [1, 16], refused: ['0', '17', 'many', ''] });
  });

  test('MME_RUNTIME_WORKER_NICE: 10 by default, 0 to 19, anything else stops start-up naming it', () => {
    checkIntegerSetting('MME_RUNTIME_WORKER_NICE', 'runtimeWorkerNice', { byDefault: 10, taken: [0, 19], range: [0, 19], refused: ['-5', '20', 'low', ''] });
  });

  test('PORT and MME_PORT: the same value as the port is accepted; another stops start-up naming SAGEMAKER_BIND_TO_PORT', () => {
    assert.equal(load({ PORT: '8080' }).port, 8080, "a platform's PORT=8080 agrees with the default");
    assert.equal(load({ SAGEMAKER_BIND_TO_PORT: '9000', MME_PORT: '9000' }).port, 9000);
    expectProblem(
      { PORT: '9000' },
      'PORT=9000 is not read by this server: the port is SAGEMAKER_BIND_TO_PORT (unset, so 8080); set SAGEMAKER_BIND_TO_PORT=9000 instead',
    );
    expectProblem(
      { SAGEMAKER_BIND_TO_PORT: '8081', MME_PORT: '9000' },
      'MME_PORT=9000 is not read by this server: the port is SAGEMAKER_BIND_TO_PORT (8081); set SAGEMAKER_BIND_TO_PORT=9000 instead',
    );
    assert.deepEqual(load({ MME_PORT: '8080' }).environmentNotices, [], 'no "did you mean MME_HOST" for MME_PORT');
  });

  test('a configuration error names the variables to change in details.settings (main.ts logs them)', () => {
    try {
      load({ SAGEMAKER_BIND_TO_PORT: 'eighty', SAGEMAKER_TS_BATCH_SIZE: '0' });
      assert.fail('no error');
    } catch (err) {
      assert.ok(err instanceof ServingError);
      assert.deepEqual(err.details?.['settings'], ['SAGEMAKER_BIND_TO_PORT', 'SAGEMAKER_TS_BATCH_SIZE'], 'the name the operator set, alias included');
    }
  });

  test('MME_LOG_FORMAT: json by default, pretty on request, anything else refused with the list', () => {
    assert.equal(load({}).logFormat, 'json');
    assert.equal(load({ MME_LOG_FORMAT: ' Pretty ' }).logFormat, 'pretty');
    expectProblem({ MME_LOG_FORMAT: 'text' }, "MME_LOG_FORMAT must be one of json, pretty, got 'text'");
    assert.equal(logFormatOf({ MME_LOG_FORMAT: 'pretty', MME_LOG_LEVEL: 'loud' }), 'pretty', 'a failed configuration is still reported in a valid format');
    assert.equal(logFormatOf({ MME_LOG_FORMAT: 'text' }), 'json');
  });

  test('modelSourceOptional: only where a platform loads the models (SageMaker MME, ModelMesh)', () => {
    assert.equal(load({}).modelSourceOptional, false);
    assert.equal(load({ SAGEMAKER_MULTI_MODEL: 'true' }).modelSourceOptional, true);
    assert.equal(load({ MME_MODEL_MESH: 'true', MME_GRPC_PORT: '8001', MME_MODEL_URL_ROOTS: '/models' }).modelSourceOptional, true);
  });

  test('MME_JS_STEP_USER: uid:gid or uid (gid the same), numbers, never root; 65534:65534 by default', () => {
    assert.deepEqual(load({}).jsStepUser, { uid: 65534, gid: 65534 });
    assert.deepEqual(load({ MME_JS_STEP_USER: '1000:1001' }).jsStepUser, { uid: 1000, gid: 1001 });
    assert.deepEqual(load({ MME_JS_STEP_USER: ' 4242 ' }).jsStepUser, { uid: 4242, gid: 4242 });
    for (const bad of ['0', '0:0', '1000:0', 'nobody', '-1', '1000:']) {
      expectProblem({ MME_JS_STEP_USER: bad }, `MME_JS_STEP_USER must be 'uid:gid' or 'uid', numbers from 1 (not root), got '${bad}'`);
    }
  });

  test('MME_HOST: trimmed; blank means the default', () => {
    assert.equal(load({ MME_HOST: ' 127.0.0.1 ' }).host, '127.0.0.1');
    assert.equal(load({ MME_HOST: '   ' }).host, '0.0.0.0');
  });

  test('SAGEMAKER_BIND_TO_PORT: integers in [0, 65535], trimmed', () => {
    assert.equal(load({ SAGEMAKER_BIND_TO_PORT: '9000' }).port, 9000);
    assert.equal(load({ SAGEMAKER_BIND_TO_PORT: ' 8081 ' }).port, 8081);
    assert.equal(load({ SAGEMAKER_BIND_TO_PORT: '0' }).port, 0);
    assert.equal(load({ SAGEMAKER_BIND_TO_PORT: '65535' }).port, 65535);
    expectProblem({ SAGEMAKER_BIND_TO_PORT: '65536' }, `SAGEMAKER_BIND_TO_PORT must be an integer in [0, 65535], got '65536'`);
    expectProblem({ SAGEMAKER_BIND_TO_PORT: '-1' }, `SAGEMAKER_BIND_TO_PORT must be an integer in [0, 65535], got '-1'`);
    expectProblem({ SAGEMAKER_BIND_TO_PORT: '80.5' }, `SAGEMAKER_BIND_TO_PORT must be an integer in [0, 65535], got '80.5'`);
    expectProblem({ SAGEMAKER_BIND_TO_PORT: 'http' }, `SAGEMAKER_BIND_TO_PORT must be an integer in [0, 65535], got 'http'`);
  });

  test('MME_ACCESS_LOG: false by default (errors and slow requests only); true logs every request', () => {
    assert.equal(load({}).accessLog, false);
    assert.equal(load({ MME_ACCESS_LOG: 'true' }).accessLog, true);
    assert.equal(load({ MME_ACCESS_LOG: 'false' }).accessLog, false);
    expectProblem({ MME_ACCESS_LOG: 'sometimes' }, `MME_ACCESS_LOG must be true or false, got 'sometimes'`);
  });

  test('MME_SLOW_REQUEST_MS: 1000 by default; integers in [1, 3600000]', () => {
    assert.equal(load({}).slowRequestMs, 1000);
    assert.equal(load({ MME_SLOW_REQUEST_MS: ' 250 ' }).slowRequestMs, 250);
    assert.equal(load({ MME_SLOW_REQUEST_MS: '' }).slowRequestMs, 1000);
    expectProblem({ MME_SLOW_REQUEST_MS: '0' }, `MME_SLOW_REQUEST_MS must be an integer in [1, 3600000], got '0'`);
    expectProblem({ MME_SLOW_REQUEST_MS: '1.5' }, `MME_SLOW_REQUEST_MS must be an integer in [1, 3600000], got '1.5'`);
  });

  test('MME_MODEL_URL_ROOTS: comma-separated absolute directories; unset or blank: any', () => {
    assert.equal(load({}).modelUrlRoots, undefined);
    assert.equal(load({ MME_MODEL_URL_ROOTS: ' ' }).modelUrlRoots, undefined);
    assert.deepEqual(load({ MME_MODEL_URL_ROOTS: '/opt/ml/models, /data/models/' }).modelUrlRoots, ['/opt/ml/models', '/data/models']);
    expectProblem({ MME_MODEL_URL_ROOTS: 'models' }, "MME_MODEL_URL_ROOTS: 'models' is not an absolute directory without '..'");
    expectProblem({ MME_MODEL_URL_ROOTS: '/opt/../etc' }, "MME_MODEL_URL_ROOTS: '/opt/../etc' is not an absolute directory without '..'");
  });

  test('an empty integer variable is an error, not 0', () => {
    expectProblem({ SAGEMAKER_BIND_TO_PORT: '' }, `SAGEMAKER_BIND_TO_PORT must be an integer in [0, 65535], got ''`);
    expectProblem({ MME_SHUTDOWN_TIMEOUT_SECONDS: ' ' }, `MME_SHUTDOWN_TIMEOUT_SECONDS must be an integer in [0, 3600], got ' '`);
  });

  test('integers must be plain decimal digits (no hex, exponent or sign-less junk)', () => {
    expectProblem({ SAGEMAKER_BIND_TO_PORT: '0x1F90' }, `SAGEMAKER_BIND_TO_PORT must be an integer in [0, 65535], got '0x1F90'`);
    expectProblem({ MME_MAX_INFLIGHT_REQUESTS: '1e3' }, `MME_MAX_INFLIGHT_REQUESTS must be an integer in [1, 9007199254740991], got '1e3'`);
  });

  test('SAGEMAKER_MULTI_MODEL: true/1/yes/on and false/0/no/off/empty, any case', () => {
    for (const v of ['true', 'TRUE', '1', 'yes', 'On', ' true ']) assert.equal(load({ SAGEMAKER_MULTI_MODEL: v }).multiModel, true, v);
    for (const v of ['false', 'False', '0', 'no', 'OFF', '']) assert.equal(load({ SAGEMAKER_MULTI_MODEL: v }).multiModel, false, v);
    expectProblem({ SAGEMAKER_MULTI_MODEL: 'maybe' }, `SAGEMAKER_MULTI_MODEL must be true or false, got 'maybe'`);
  });

  test('SAGEMAKER_MAX_PAYLOAD_IN_MB: MiB in [1, 4096] → bytes', () => {
    assert.equal(load({ SAGEMAKER_MAX_PAYLOAD_IN_MB: '10' }).bodyLimitBytes, 10 * MIB);
    assert.equal(load({ SAGEMAKER_MAX_PAYLOAD_IN_MB: '1' }).bodyLimitBytes, MIB);
    assert.equal(load({ SAGEMAKER_MAX_PAYLOAD_IN_MB: '4096' }).bodyLimitBytes, 4096 * MIB);
    expectProblem({ SAGEMAKER_MAX_PAYLOAD_IN_MB: '0' }, `SAGEMAKER_MAX_PAYLOAD_IN_MB must be an integer in [1, 4096], got '0'`);
    expectProblem({ SAGEMAKER_MAX_PAYLOAD_IN_MB: '4097' }, `SAGEMAKER_MAX_PAYLOAD_IN_MB must be an integer in [1, 4096], got '4097'`);
  });

  for (const [name, key] of [
    ['MME_MODEL_SOURCE', 'modelSource'],
    ['MME_CACHE_DIR', 'cacheDir'],
  ] as const) {
    test(`${name}: absolute and relative paths, file:// URLs; other schemes rejected`, () => {
      assert.equal(load({ [name]: '/srv/models' })[key], '/srv/models');
      assert.equal(load({ [name]: ' /srv/models/ ' })[key], '/srv/models');
      assert.equal(load({ [name]: 'rel/dir' })[key], path.resolve('rel/dir'));
      assert.equal(load({ [name]: 'file:///srv/my%20models' })[key], '/srv/my models');
      assert.equal(load({ [name]: 'file:///srv/models/' })[key], '/srv/models/');
      if (name === 'MME_CACHE_DIR') {
        expectProblem({ [name]: 's3://bucket/prefix' }, `${name}: unsupported scheme in 's3://bucket/prefix' (use a local directory or file:// URL)`);
      }
      expectProblem({ [name]: 'HTTPS://host/x' }, `${name}: unsupported scheme in 'HTTPS://host/x' (use a local directory or file:// URL)`);
    });
  }

  test('MME_MODEL_SOURCE: s3://bucket/prefix is kept as a normalised S3 URI; a bad bucket is reported', () => {
    assert.equal(load({ MME_MODEL_SOURCE: 's3://bucket/prefix' }).modelSource, 's3://bucket/prefix/');
    assert.equal(load({ MME_MODEL_SOURCE: 's3://my-bucket/' }).modelSource, 's3://my-bucket/');
    expectProblem(
      { MME_MODEL_SOURCE: 's3://b/p' },
      `MME_MODEL_SOURCE: invalid S3 location "s3://b/p": bad bucket name 'b': it must be 3 to 63 characters long`,
    );
  });

  test('AWS_REGION / AWS_DEFAULT_REGION and AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL', () => {
    assert.equal(load({}).awsRegion, undefined);
    assert.equal(load({ AWS_DEFAULT_REGION: 'eu-west-1' }).awsRegion, 'eu-west-1');
    assert.equal(load({ AWS_REGION: 'us-west-2', AWS_DEFAULT_REGION: 'eu-west-1' }).awsRegion, 'us-west-2');
    assert.equal(load({ AWS_ENDPOINT_URL: 'http://127.0.0.1:9000' }).s3Endpoint, 'http://127.0.0.1:9000');
    assert.equal(load({ AWS_ENDPOINT_URL_S3: 'https://s3.local', AWS_ENDPOINT_URL: 'http://x' }).s3Endpoint, 'https://s3.local');
    expectProblem({ AWS_ENDPOINT_URL_S3: 'localhost:9000' }, `AWS_ENDPOINT_URL_S3 must be an http(s) URL, got 'localhost:9000'`);
  });

  test('file://localhost/ URLs are local paths too', () => {
    assert.equal(load({ MME_MODEL_SOURCE: 'file://localhost/srv/x' }).modelSource, '/srv/x');
  });

  test('a malformed file:// URL is reported with the variable name and value', () => {
    const message = configError({ MME_MODEL_SOURCE: 'file://models' });
    assert.ok(message.includes('MME_MODEL_SOURCE'), message);
    assert.ok(message.includes('file://models'), message);
  });

  test('MME_DEFAULT_MODEL: trimmed; blank means none', () => {
    assert.equal(load({ MME_DEFAULT_MODEL: ' resnet ' }).defaultModel, 'resnet');
    assert.equal(load({ MME_DEFAULT_MODEL: '  ' }).defaultModel, undefined);
  });

  test('SAGEMAKER_TRITON_DEFAULT_MODEL_NAME is an alias of MME_DEFAULT_MODEL; the primary name wins', () => {
    assert.equal(load({ SAGEMAKER_TRITON_DEFAULT_MODEL_NAME: 'ens' }).defaultModel, 'ens');
    assert.equal(load({ SAGEMAKER_TRITON_DEFAULT_MODEL_NAME: 'ens', MME_DEFAULT_MODEL: 'primary' }).defaultModel, 'primary');
    const setting = SETTINGS.find((s) => s.key === 'defaultModel');
    assert.deepEqual(setting?.env, ['MME_DEFAULT_MODEL', 'SAGEMAKER_TRITON_DEFAULT_MODEL_NAME']);
  });

  test('MME_EXECUTION_PROVIDERS: auto/blank → undefined; lists are trimmed, lower-cased, de-duplicated', () => {
    for (const v of ['auto', 'AUTO', ' Auto ', '', '  ']) assert.equal(load({ MME_EXECUTION_PROVIDERS: v }).executionProviders, undefined, v);
    assert.deepEqual(load({ MME_EXECUTION_PROVIDERS: 'cuda,cpu' }).executionProviders, ['cuda', 'cpu']);
    assert.deepEqual(load({ MME_EXECUTION_PROVIDERS: ' TensorRT , CUDA ,cpu' }).executionProviders, ['tensorrt', 'cuda', 'cpu']);
    assert.deepEqual(load({ MME_EXECUTION_PROVIDERS: 'cuda,cuda,,cpu,cuda' }).executionProviders, ['cuda', 'cpu']);
    assert.deepEqual(load({ MME_EXECUTION_PROVIDERS: 'cpu' }).executionProviders, ['cpu']);
    assert.deepEqual(PROVIDER_NAMES, ['tensorrt', 'cuda', 'cpu']);
    expectProblem({ MME_EXECUTION_PROVIDERS: 'cuda,rocm' }, `MME_EXECUTION_PROVIDERS: unknown provider 'rocm' (expected one of tensorrt, cuda, cpu, auto)`);
  });

  test('MME_LOG_LEVEL: the pino levels, any case', () => {
    for (const level of ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']) {
      assert.equal(load({ MME_LOG_LEVEL: level.toUpperCase() }).logLevel, level);
    }
    expectProblem({ MME_LOG_LEVEL: 'verbose' }, `MME_LOG_LEVEL: unknown level 'verbose' (expected one of trace, debug, info, warn, error, fatal, silent)`);
  });

  test('MME_ARCHIVE_MAX_BYTES and MME_ARCHIVE_MAX_ENTRIES: integers >= 1', () => {
    assert.equal(load({ MME_ARCHIVE_MAX_BYTES: '1024' }).archiveMaxBytes, 1024);
    assert.equal(load({ MME_ARCHIVE_MAX_ENTRIES: '7' }).archiveMaxEntries, 7);
    expectProblem({ MME_ARCHIVE_MAX_BYTES: '0' }, `MME_ARCHIVE_MAX_BYTES must be at least 1 byte, got '0'`);
    expectProblem({ MME_ARCHIVE_MAX_ENTRIES: '1.5' }, `MME_ARCHIVE_MAX_ENTRIES must be an integer in [1, 9007199254740991], got '1.5'`);
  });

  test('MME_SHUTDOWN_TIMEOUT_SECONDS: seconds in [0, 3600] → milliseconds', () => {
    assert.equal(load({ MME_SHUTDOWN_TIMEOUT_SECONDS: '10' }).shutdownTimeoutMs, 10000);
    assert.equal(load({ MME_SHUTDOWN_TIMEOUT_SECONDS: '0' }).shutdownTimeoutMs, 0);
    assert.equal(load({ MME_SHUTDOWN_TIMEOUT_SECONDS: '3600' }).shutdownTimeoutMs, 3600000);
    expectProblem({ MME_SHUTDOWN_TIMEOUT_SECONDS: '3601' }, `MME_SHUTDOWN_TIMEOUT_SECONDS must be an integer in [0, 3600], got '3601'`);
  });

  test('MME_MAX_INFLIGHT_REQUESTS: integers >= 1', () => {
    assert.equal(load({ MME_MAX_INFLIGHT_REQUESTS: '5' }).maxInflightRequests, 5);
    expectProblem({ MME_MAX_INFLIGHT_REQUESTS: '0' }, `MME_MAX_INFLIGHT_REQUESTS must be an integer in [1, 9007199254740991], got '0'`);
  });

  test('MME_MAIN_THREAD_MAX_RUN_US (default 1000) and MME_MAIN_THREAD_ONLY_MAX_RUN_US (default 15): µs in [0, 100000]', () => {
    const defaults = load({});
    assert.equal(defaults.mainThreadMaxRunUs, 1000);
    assert.equal(defaults.mainThreadOnlyMaxRunUs, 15);
    assert.equal(load({ MME_MAIN_THREAD_ONLY_MAX_RUN_US: '0' }).mainThreadOnlyMaxRunUs, 0);
    assert.equal(load({ MME_MAIN_THREAD_ONLY_MAX_RUN_US: ' 40 ' }).mainThreadOnlyMaxRunUs, 40);
    expectProblem({ MME_MAIN_THREAD_ONLY_MAX_RUN_US: '100001' }, `MME_MAIN_THREAD_ONLY_MAX_RUN_US must be an integer in [0, 100000], got '100001'`);
    expectProblem({ MME_MAIN_THREAD_ONLY_MAX_RUN_US: '-1' }, `MME_MAIN_THREAD_ONLY_MAX_RUN_US must be an integer in [0, 100000], got '-1'`);
  });
});

describe('loadServerConfig: errors and result', () => {
  test('every invalid value is reported in one error, in SETTINGS order', () => {
    const message = configError({
      MME_MAX_INFLIGHT_REQUESTS: '-3',
      SAGEMAKER_BIND_TO_PORT: 'x',
      MME_LOG_LEVEL: 'loud',
      MME_MODEL_SOURCE: 'gs://b/p',
      SAGEMAKER_MULTI_MODEL: 'perhaps',
      MME_EXECUTION_PROVIDERS: 'gpu',
      MME_HOST: 'fine.example',
    });
    assert.equal(
      message,
      'invalid server configuration: ' +
        [
          `SAGEMAKER_BIND_TO_PORT must be an integer in [0, 65535], got 'x'`,
          `SAGEMAKER_MULTI_MODEL must be true or false, got 'perhaps'`,
          `MME_MODEL_SOURCE: unsupported scheme in 'gs://b/p' (use a local directory or file:// URL)`,
          `MME_EXECUTION_PROVIDERS: unknown provider 'gpu'; did you mean 'cpu'? (expected one of tensorrt, cuda, cpu, auto)`,
          `MME_LOG_LEVEL: unknown level 'loud' (expected one of trace, debug, info, warn, error, fatal, silent)`,
          `MME_MAX_INFLIGHT_REQUESTS must be an integer in [1, 9007199254740991], got '-3'`,
        ].join('; '),
    );
  });

  test('the result is deeply frozen', () => {
    const config = load({ MME_EXECUTION_PROVIDERS: 'cuda,cpu' });
    assert.ok(Object.isFrozen(config));
    assert.ok(Object.isFrozen(config.executionProviders));
    assert.throws(() => {
      (config as { port: number }).port = 1;
    }, TypeError);
    assert.throws(() => {
      (config.executionProviders as string[]).push('tensorrt');
    }, TypeError);
    assert.equal(config.port, 8080);
    assert.deepEqual(config.executionProviders, ['cuda', 'cpu']);
  });

  test('each call parses afresh (no shared state between calls)', () => {
    assert.equal(load({ SAGEMAKER_BIND_TO_PORT: '1234' }).port, 1234);
    assert.equal(load({}).port, 8080);
  });
});

// ------------------------------------------------------------------ docs

function isRepoRoot(dir: string): boolean {
  const pkg = path.join(dir, 'package.json');
  if (!existsSync(pkg)) return false;
  try {
    return (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: unknown }).name === 'onnx-mme';
  } catch {
    return false;
  }
}

function findRepoRoot(): string | undefined {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    if (isRepoRoot(dir)) return dir;
    if (path.dirname(dir) === dir) break;
  }
  return isRepoRoot(process.cwd()) ? process.cwd() : undefined;
}

const repoRoot = findRepoRoot();
const readmePath = repoRoot === undefined ? undefined : path.join(repoRoot, 'docs', 'configuration.md');

describe('docs/configuration.md', () => {
  test('docs/configuration.md mentions every environment variable in SETTINGS', () => {
    assert.ok(readmePath, 'repository root (package.json named onnx-mme) not found from the test file or the working directory');
    assert.ok(existsSync(readmePath), `docs/configuration.md is missing at ${readmePath}`);
    const readme = readFileSync(readmePath, 'utf8');
    const names = SETTINGS.flatMap((s) => s.env);
    assert.ok(names.includes('SAGEMAKER_TRITON_DEFAULT_MODEL_NAME'));
    const missing = names.filter((n) => !new RegExp(`(^|[^A-Z0-9_])${n}([^A-Z0-9_]|$)`).test(readme));
    assert.deepEqual(missing, [], `docs/configuration.md does not mention: ${missing.join(', ')}`);
  });
});

describe('MME_HOT_MODEL_MAX_INSTANCES', () => {
  test('defaults to the runtime workers, leaving a core to the main thread; a value set wins', () => {
    assert.equal(load({ MME_CPU_COUNT: '2' }).hotModelMaxInstances, 1, 'a 2-CPU machine never grows a model');
    assert.equal(load({ MME_CPU_COUNT: '8' }).hotModelMaxInstances, 7);
    assert.equal(load({ MME_CPU_COUNT: '32' }).hotModelMaxInstances, 16, 'the default workers are at most 16');
    assert.equal(load({ MME_CPU_COUNT: '8', MME_RUNTIME_WORKERS: '3' }).hotModelMaxInstances, 3);
    assert.equal(load({ MME_CPU_COUNT: '2', MME_HOT_MODEL_MAX_INSTANCES: '2' }).hotModelMaxInstances, 2);
    assert.throws(() => load({ MME_HOT_MODEL_MAX_INSTANCES: '0' }), /MME_HOT_MODEL_MAX_INSTANCES/);
  });
});

describe('MME_DEFAULT_MAX_BATCH_SIZE', () => {
  test("defaults to Triton's 4; 0 and larger values are taken; anything else stops start-up naming it", () => {
    checkIntegerSetting('MME_DEFAULT_MAX_BATCH_SIZE', 'defaultMaxBatchSize', {
      byDefault: 4,
      taken: [0, 64],
      range: [0, 2147483647],
      refused: ['-1', 'four', '1.5', '2147483648'],
    });
  });
});
