/**
 * @module test/unit/http/v2-status
 * The KServe v2 routes' status flavour (Triton answers a full queue and an
 * expired queue timeout with 503; everything else as on the SageMaker
 * routes), and the server metadata's version kept equal to package.json's.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ERROR_CODES, ServingError } from '../../../src/errors.js';
import { errorReply, httpStatusOf, kserveStatusOf } from '../../../src/http/error-response.js';
import { KNOWN_PATHS as V2_PATHS } from '../../../src/http/route-table.js';
import { SERVER_VERSION } from '../../../src/http/v2-routes.js';

describe('KServe status flavour', () => {
  test('OVERLOADED and TIMEOUT are 503; every other code keeps its status', () => {
    for (const code of ERROR_CODES) {
      const expected = code === 'OVERLOADED' || code === 'TIMEOUT' ? 503 : httpStatusOf(code);
      assert.equal(kserveStatusOf(code), expected, code);
    }
    const reply = errorReply(new ServingError('OVERLOADED', 'full'), 'kserve');
    assert.equal(reply.status, 503);
    assert.deepEqual(JSON.parse(reply.body), { error: 'full', code: 'OVERLOADED', message: 'full' });
    assert.equal(errorReply(new ServingError('OVERLOADED', 'full')).status, 429);
  });
});

describe('GET /v2 metadata', () => {
  test("SERVER_VERSION is package.json's version", async () => {
    // Above the compiled test (dist/test/unit/http), else the working directory (tests run from the repository).
    const candidates: string[] = [];
    for (let dir = path.dirname(fileURLToPath(import.meta.url)), i = 0; i < 6; i++, dir = path.dirname(dir)) candidates.push(dir);
    candidates.push(process.cwd());
    let pkg: string | undefined;
    for (const dir of candidates) {
      const text = await readFile(path.join(dir, 'package.json'), 'utf8').catch(() => undefined);
      if (text !== undefined && (JSON.parse(text) as { name?: string }).name === 'onnx-mme') {
        pkg = text;
        break;
      }
    }
    assert.ok(pkg, 'package.json of onnx-mme found above the test');
    assert.equal(SERVER_VERSION, (JSON.parse(pkg) as { version: string }).version);
  });

  test('the v2 path patterns tell known paths (405 on a wrong method) from unknown ones (404)', () => {
    const known = [
      '/v2',
      '/v2/health/live',
      '/v2/models/m',
      '/v2/models/m/stats',
      '/v2/models/stats',
      '/v2/models/m/versions/3/infer',
      '/v2/models/m/ready',
      '/v2/repository/index',
      '/v2/repository/models/m/unload',
    ];
    const unknown = ['/v2/nope', '/v2/models/m/stats/x', '/v2/models', '/v2/repository/models/m/delete'];
    for (const p of known)
      assert.ok(
        V2_PATHS.some((r) => r.test(p)),
        p,
      );
    for (const p of unknown) assert.ok(!V2_PATHS.some((r) => r.test(p)), p);
  });
});
