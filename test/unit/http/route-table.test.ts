/**
 * One route table (src/http/route-table.ts): the express application
 * declares exactly its routes (nothing else, nothing missing),
 * docs/openapi.json documents exactly the same method/path pairs, and the
 * 404/405 patterns come from it.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { Admission } from '../../../src/service/admission.js';
import { sagemakerRoutes } from '../../../src/http/sagemaker-routes.js';
import { v2Routes } from '../../../src/http/v2-routes.js';
import { KNOWN_PATHS, methodsFor, ROUTE_LIST } from '../../../src/http/route-table.js';
import type { InferenceService } from '../../../src/service/inference-service.js';

function repoFile(rel: string): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); path.dirname(dir) !== dir; dir = path.dirname(dir)) {
    try {
      return readFileSync(path.join(dir, rel), 'utf8');
    } catch {
      // keep looking upwards
    }
  }
  throw new Error(`${rel} not found`);
}

const table = ROUTE_LIST.map((r) => `${r.method} ${r.path}`).sort();

interface Layer {
  route?: { path: string; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

function declared(router: { stack: Layer[] }): string[] {
  const out: string[] = [];
  for (const layer of router.stack) {
    if (layer.route) for (const m of Object.keys(layer.route.methods)) out.push(`${m.toUpperCase()} ${layer.route.path}`);
    else if (layer.handle?.stack) out.push(...declared(layer.handle as { stack: Layer[] }));
  }
  return out;
}

test('the express routers declare exactly the route table but its inference routes, which the front serves (the app adds /metrics from it too)', () => {
  const deps = {
    service: {} as InferenceService,
    bodyLimitBytes: 1,
    defaultAccept: 'application/json' as const,
    context: () => undefined as never,
    isDraining: () => false,
    unhealthy: () => undefined,
    admission: new Admission({ maxInflightBytes: 1, maxQueued: 1 }),
    guard: () => undefined,
  };
  const routes = [
    ...declared(sagemakerRoutes(deps) as unknown as { stack: Layer[] }),
    ...declared(v2Routes(deps) as unknown as { stack: Layer[] }),
    'GET /metrics',
  ];
  assert.deepEqual(
    routes.sort(),
    ROUTE_LIST.filter((r) => r.lean !== true)
      .map((r) => `${r.method} ${r.path}`)
      .sort(),
  );
  assert.deepEqual(
    ROUTE_LIST.filter((r) => r.lean === true).map((r) => r.group),
    ROUTE_LIST.filter((r) => r.lean === true).map(() => 'inference'),
  );
});

test('docs/openapi.json documents exactly the route table, with the error body every client reads', () => {
  const doc = JSON.parse(repoFile('docs/openapi.json')) as {
    openapi: string;
    paths: Record<string, Record<string, unknown>>;
    components: { schemas: { Error: { required: string[] } } };
  };
  assert.match(doc.openapi, /^3\./);
  const documented = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p.replace(/\{([A-Za-z]+)\}/g, ':$1')}`));
  assert.deepEqual(documented.sort(), table);
  // Each operation names its API group (MME_HTTP_RESTRICTED_API) and whether it loads or unloads (MME_MODEL_CONTROL), as the table does.
  const access = Object.entries(doc.paths).flatMap(([p, ops]) =>
    Object.entries(ops as Record<string, { 'x-api-group'?: string; 'x-model-control'?: boolean }>).map(
      ([m, op]) => `${m.toUpperCase()} ${p.replace(/\{([A-Za-z]+)\}/g, ':$1')} ${op['x-api-group']}${op['x-model-control'] === true ? ' controls' : ''}`,
    ),
  );
  assert.deepEqual(access.sort(), ROUTE_LIST.map((r) => `${r.method} ${r.path} ${r.group}${r.controls === true ? ' controls' : ''}`).sort());
  assert.deepEqual([...doc.components.schemas.Error.required].sort(), ['code', 'error', 'message']);
});

test('404 versus 405 comes from the table', () => {
  assert.ok(KNOWN_PATHS.some((p) => p.test('/v2/models/x/stats')));
  assert.ok(!KNOWN_PATHS.some((p) => p.test('/v2/models/x/nope/more')));
  assert.deepEqual(methodsFor('/models/x').sort(), ['DELETE', 'GET']);
  assert.deepEqual(methodsFor('/ping').sort(), ['GET', 'POST']);
});
