/**
 * Settings that speak up (config/env-notices.ts): every MME_* / SAGEMAKER_*
 * variable no setting reads gets one notice, a warning with the nearest
 * known name for unknown ones, an info line with the reason for known
 * SageMaker/Triton ones; docs/configuration.md lists the ignored ones and
 * the honoured SageMaker ones exactly.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { environmentNotices, IGNORED_ENV } from '../../../src/config/env-notices.js';
import { nearestName } from '../../../src/protocol/did-you-mean.js';
import { KNOWN_ENV, loadServerConfig } from '../../../src/config/server-config.js';

function docsPage(name: string): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); path.dirname(dir) !== dir; dir = path.dirname(dir)) {
    try {
      return readFileSync(path.join(dir, 'docs', name), 'utf8');
    } catch {
      // keep looking upwards
    }
  }
  throw new Error(`docs/${name} not found`);
}

describe('environment notices', () => {
  test("the issue's three examples: a misspelling warns with the right name; known foreign names say what to use", () => {
    const notices = environmentNotices({ MME_MEMORY_BUDGET: '1g', SAGEMAKER_TRITON_LOG_VERBOSE: '1', SAGEMAKER_MODEL_SERVER_WORKERS: '4' }, KNOWN_ENV);
    assert.deepEqual(
      notices.map((n) => [n.name, n.level]),
      [
        ['MME_MEMORY_BUDGET', 'warn'],
        ['SAGEMAKER_MODEL_SERVER_WORKERS', 'info'],
        ['SAGEMAKER_TRITON_LOG_VERBOSE', 'info'],
      ],
    );
    assert.match(notices[0]!.message, /did you mean MME_MEMORY_BUDGET_BYTES\?/);
    assert.match(notices[1]!.message, /MME_RUNTIME_WORKERS/);
    assert.match(notices[2]!.message, /MME_LOG_LEVEL=debug/);
  });

  test('nearest names: typos, missing suffixes; nothing for a name far from all', () => {
    assert.equal(nearestName('MME_RUNTIME_WORKER', KNOWN_ENV), 'MME_RUNTIME_WORKERS');
    assert.equal(nearestName('MME_LOGLEVEL', KNOWN_ENV), 'MME_LOG_LEVEL');
    assert.equal(nearestName('SAGEMAKER_BIND_PORT', KNOWN_ENV), 'SAGEMAKER_BIND_TO_PORT');
    assert.equal(nearestName('MME_COMPLETELY_DIFFERENT_THING', KNOWN_ENV), undefined);
  });

  test('known settings, other prefixes and unset values are not mentioned', () => {
    assert.deepEqual(
      environmentNotices({ MME_LOG_LEVEL: 'info', SAGEMAKER_BIND_TO_PORT: '8080', AWS_REGION: 'x', PATH: '/bin', MME_X: undefined }, KNOWN_ENV),
      [],
    );
  });

  test('loadServerConfig carries them (startServer logs each once)', () => {
    const config = loadServerConfig({ MME_MODEL_SOURCE: '/tmp', MME_MEMORY_BUDGET: '1' });
    assert.equal(config.environmentNotices.length, 1);
    assert.equal(config.environmentNotices[0]!.name, 'MME_MEMORY_BUDGET');
  });

  test('docs/configuration.md lists every ignored variable and exactly the honoured SAGEMAKER_* ones', () => {
    const doc = docsPage('configuration.md');
    const section = doc.slice(doc.indexOf('## Variables the server does not read'));
    const listed = [...section.matchAll(/^\| `(SAGEMAKER_[A-Z_]+)` \|/gm)].map((m) => m[1]!);
    assert.deepEqual(listed.sort(), Object.keys(IGNORED_ENV).sort());
    const honouredText = section.slice(section.indexOf('Honoured'), section.indexOf('Variables of other'));
    const honoured = [...honouredText.matchAll(/`(SAGEMAKER_[A-Z_]+)`/g)].map((m) => m[1]!);
    assert.deepEqual(honoured.sort(), KNOWN_ENV.filter((n) => n.startsWith('SAGEMAKER_')).sort());
    for (const n of Object.keys(IGNORED_ENV)) assert.ok(!KNOWN_ENV.includes(n), `${n} is both read and listed as ignored`);
  });
});
