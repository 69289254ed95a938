/**
 * @module test/support/check-imports
 * Enforces the architecture's import directions (docs/architecture.md):
 * transport → service → registry → ensemble → scheduler → runtime/backends/store
 * (the registry builds each model's batchers and execution plan; the scheduler
 * reports load facts and the runtime decides where a session runs), with
 * express only in the HTTP layer, onnxruntime only in runtime/, archives and
 * the AWS SDK only in store/. Run by `npm run lint` and by a unit test.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Which src folders each folder may import. Root files (app, server, main, errors, cancellation, clock) are listed by name. */
export const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  errors: [],
  // A request's cancellation (src/cancellation.ts): carried from the transport down to the queues, like errors.
  cancellation: [],
  // Time as every stateful part reads it (src/clock.ts), injected so that tests drive it by hand.
  clock: [],
  protocol: ['protocol', 'errors'],
  config: ['config', 'protocol', 'errors'],
  observability: ['observability', 'config', 'errors'],
  store: ['store', 'config', 'observability', 'errors', 'clock'],
  runtime: ['runtime', 'config', 'protocol', 'observability', 'errors'],
  // Processing steps (image, tokenizer, tensor ops, js): beside runtime/, loaded by the registry; no scheduler knowledge.
  backends: ['backends', 'config', 'protocol', 'observability', 'errors'],
  // Batching only: it reports facts about load with each batch, and knows nothing of sessions, placement or models in memory.
  scheduler: ['scheduler', 'protocol', 'config', 'observability', 'errors', 'cancellation', 'clock'],
  ensemble: ['ensemble', 'scheduler', 'protocol', 'config', 'errors', 'cancellation'],
  registry: ['registry', 'store', 'runtime', 'backends', 'scheduler', 'ensemble', 'config', 'protocol', 'observability', 'errors', 'cancellation', 'clock'],
  // The service works on the registry's handles; where models are stored is the registry's business, never the service's.
  service: ['service', 'registry', 'ensemble', 'scheduler', 'protocol', 'config', 'observability', 'errors', 'cancellation', 'clock'],
  // The transports reach models only through the service (which re-exports the registry's vocabulary they need).
  http: ['http', 'service', 'protocol', 'config', 'observability', 'errors', 'cancellation'],
  // The gRPC transport sits beside http/: the same service layer, never the HTTP layer itself.
  grpc: ['grpc', 'service', 'protocol', 'config', 'observability', 'errors', 'cancellation'],
  app: ['http', 'service', 'protocol', 'observability', 'errors', 'cancellation'],
  server: ['*'],
  main: ['*'],
  // The load generator (onnx-mme perf): a client of any endpoint; it knows the wire formats, not the server.
  perf: ['perf', 'protocol', 'errors'],
  // onnx-mme tune: starts the server in-process on candidate configs and measures them with perf/.
  tune: ['tune', 'perf', 'server', 'config', 'observability', 'errors'],
  // The command line is an entry point like main: it composes the layers (validate = registry, pack/push = archives and S3).
  cli: ['*'],
};

/** Packages confined to one layer. */
const PACKAGE_OWNERS: Readonly<Record<string, readonly string[]>> = {
  express: ['http', 'app'],
  'onnxruntime-node': ['runtime'],
  tar: ['store', 'cli'],
  '@aws-sdk/client-s3': ['store', 'cli'],
  '@aws-sdk/lib-storage': ['cli'],
  sharp: ['backends'],
  '@grpc/grpc-js': ['grpc'],
  '@grpc/proto-loader': ['grpc'],
  '@huggingface/tokenizers': ['backends'],
  '@aws-sdk/client-sagemaker-runtime': ['perf'],
};

function layerOf(srcRel: string): string {
  const first = srcRel.split('/')[0]!;
  return first.replace(/\.(ts|js)$/, '');
}

async function tsFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await tsFiles(p)));
    else if (e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

export async function findViolations(repoRoot: string): Promise<string[]> {
  const srcDir = path.join(repoRoot, 'src');
  const problems: string[] = [];
  for (const file of await tsFiles(srcDir)) {
    const rel = path.relative(srcDir, file).split(path.sep).join('/');
    const layer = layerOf(rel);
    const allowed = ALLOWED[layer];
    if (!allowed) {
      problems.push(`src/${rel}: folder '${layer}' has no import rule; add it to test/support/check-imports.ts`);
      continue;
    }
    const text = await readFile(file, 'utf8');
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[1] ?? m[2]!;
      if (spec.startsWith('.')) {
        const target = path
          .relative(srcDir, path.resolve(path.dirname(file), spec))
          .split(path.sep)
          .join('/');
        if (target.startsWith('..')) {
          problems.push(`src/${rel}: imports '${spec}' from outside src/`);
          continue;
        }
        const targetLayer = layerOf(target);
        if (!allowed.includes('*') && !allowed.includes(targetLayer)) problems.push(`src/${rel}: '${layer}' must not import '${targetLayer}' ('${spec}')`);
      } else {
        const pkg = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
        const owners = PACKAGE_OWNERS[pkg];
        if (owners && !owners.includes(layer)) problems.push(`src/${rel}: only ${owners.join(', ')} may import '${pkg}'`);
      }
    }
  }
  return problems;
}

const self = fileURLToPath(import.meta.url);
if (process.argv[1] && path.resolve(process.argv[1]) === self) {
  const repoRoot = path.resolve(path.dirname(self), '..', '..', '..');
  const problems = await findViolations(repoRoot);
  for (const p of problems) process.stderr.write(`${p}\n`);
  process.stdout.write(problems.length === 0 ? 'import directions: ok\n' : `import directions: ${problems.length} violation(s)\n`);
  process.exit(problems.length === 0 ? 0 : 1);
}
