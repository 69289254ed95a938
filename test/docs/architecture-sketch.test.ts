/**
 * The architecture as the docs draw it is the architecture the import checker
 * enforces (test/support/check-imports.ts, `ALLOWED`):
 *
 * - docs/architecture.md's layer table ("Layers and import directions") has
 *   one row per layer of `ALLOWED`, with the same imports, and its tiers
 *   agree with them: entry points on top, then the core stack, where a layer
 *   imports only layers of a higher tier number (so layers of one tier import
 *   neither each other), then what is beneath every layer;
 * - each sketch marked `<!-- layers-sketch … -->` (README.md's and
 *   docs/architecture.md's) draws every folder of src/, names nothing src/
 *   does not hold, and places the layers as the table's tiers say: the entry
 *   points above the core, one line per core tier in order, the layers of one
 *   tier on one line, the rest below.
 *
 * A layer's place in a sketch is the line where `src/<name>/` or
 * `src/<name>.ts` first appears. Root modules that import nothing (errors.ts,
 * cancellation.ts, a clock added later) need no row and no mention: they may
 * be left out of the table, of its lists and of the sketches, so adding one
 * to src/ and `ALLOWED` breaks nothing here.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { ALLOWED } from '../support/check-imports.js';
import { codeBlocks } from '../support/markdown.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const read = (rel: string): string => readFileSync(path.join(repoRoot, rel), 'utf8');

type Kind = 'folder' | 'file';
type Tier = 'entry' | 'beneath' | number;
type Allowed = Readonly<Record<string, readonly string[]>>;
interface Row {
  readonly layer: string;
  readonly kind: Kind;
  readonly tier: Tier;
  /** ['*'] for "any layer". */
  readonly imports: readonly string[];
}

/** What src/ holds at its top: folders and root modules (`errors.ts` → errors). */
function srcEntries(root: string): Map<string, Kind> {
  const out = new Map<string, Kind>();
  for (const e of readdirSync(path.join(root, 'src'), { withFileTypes: true })) {
    if (e.isDirectory()) out.set(e.name, 'folder');
    else if (e.name.endsWith('.ts')) out.set(e.name.slice(0, -3), 'file');
  }
  return out;
}

/** A root module that imports nothing: it may go unmentioned. */
function isRootLeaf(name: string, allowed: Allowed, src: ReadonlyMap<string, Kind>): boolean {
  return src.get(name) === 'file' && (allowed[name] ?? ['*']).every((n) => n === name);
}

/** `x/` or `x.ts` → [x, kind]. */
function nameOf(token: string): [string, Kind] {
  return token.endsWith('/') ? [token.slice(0, -1), 'folder'] : [token.replace(/\.ts$/, ''), 'file'];
}

function parseLayerTable(markdown: string): Row[] {
  const lines = markdown.split('\n');
  const start = lines.findIndex((l) => /^## Layers and import directions\s*$/.test(l));
  assert.ok(start >= 0, 'docs/architecture.md has a "## Layers and import directions" section');
  const rows: Row[] = [];
  for (const line of lines.slice(start + 1)) {
    if (/^#{1,2} /.test(line)) break;
    const cells = line.split('|').map((c) => c.trim());
    const layer = /^`src\/([a-z0-9-]+(?:\/|\.ts))`$/.exec(cells[2] ?? '');
    if (!line.startsWith('|') || !layer) continue;
    const tierCell = cells[1]!;
    const tier: Tier = tierCell === 'entry' || tierCell === 'beneath' ? tierCell : Number(tierCell);
    assert.ok(tier === 'entry' || tier === 'beneath' || Number.isInteger(tier), `tier '${tierCell}' of ${cells[2]}: entry, beneath or a number`);
    const [name, kind] = nameOf(layer[1]!);
    const mayCell = cells[3] ?? '';
    const imports =
      mayCell === 'any layer' ? ['*'] : mayCell === 'nothing' ? [] : [...mayCell.matchAll(/`([a-z0-9-]+(?:\/|\.ts))`/g)].map((m) => nameOf(m[1]!)[0]);
    rows.push({ layer: name, kind, tier, imports });
  }
  return rows;
}

function checkNames(where: string, names: Iterable<[string, Kind]>, allowed: Allowed, src: ReadonlyMap<string, Kind>): string[] {
  const problems: string[] = [];
  for (const [name, kind] of names) {
    const shown = kind === 'folder' ? `src/${name}/` : `src/${name}.ts`;
    if (src.get(name) !== kind) problems.push(`${where} names ${shown}, which src/ does not hold`);
    else if (allowed[name] === undefined) problems.push(`${where} names ${shown}, which has no entry in ALLOWED (test/support/check-imports.ts)`);
  }
  return problems;
}

/** The table's rows against ALLOWED: the same layers, the same imports. */
function checkTableImports(rows: readonly Row[], allowed: Allowed, src: ReadonlyMap<string, Kind>): string[] {
  const problems = checkNames('the layer table', [...rows.map((r): [string, Kind] => [r.layer, r.kind])], allowed, src);
  const byLayer = new Map(rows.map((r) => [r.layer, r]));
  if (byLayer.size !== rows.length) problems.push('the layer table has a layer twice');
  for (const layer of Object.keys(allowed)) {
    if (!byLayer.has(layer) && !isRootLeaf(layer, allowed, src)) problems.push(`the layer table has no row for '${layer}'`);
  }
  for (const row of rows) {
    const want = new Set((allowed[row.layer] ?? []).filter((n) => n !== row.layer));
    const doc = new Set(row.imports.filter((n) => n !== row.layer));
    for (const n of doc) {
      if (n !== '*' && !src.has(n)) problems.push(`row '${row.layer}' lists '${n}', which src/ does not hold`);
      if (!want.has(n)) problems.push(`row '${row.layer}' lists '${n}', which ALLOWED does not let it import`);
    }
    for (const n of want) if (!doc.has(n) && !isRootLeaf(n, allowed, src)) problems.push(`row '${row.layer}' misses '${n}', which ALLOWED lets it import`);
  }
  return problems;
}

function tierOf(layer: string, rows: readonly Row[]): Tier {
  return rows.find((r) => r.layer === layer)?.tier ?? 'beneath';
}

/** The tiers against ALLOWED: nothing imports upwards, nor within a core tier. */
function checkTiers(rows: readonly Row[], allowed: Allowed): string[] {
  const problems: string[] = [];
  for (const [layer, imports] of Object.entries(allowed)) {
    const from = tierOf(layer, rows);
    if (imports.includes('*')) {
      if (from !== 'entry') problems.push(`'${layer}' may import any layer, so its tier must be 'entry'`);
      continue;
    }
    for (const target of imports.filter((n) => n !== layer)) {
      const to = tierOf(target, rows);
      const upward =
        from === 'entry'
          ? false
          : to === 'entry' || (from === 'beneath' && to !== 'beneath') || (typeof from === 'number' && typeof to === 'number' && to <= from);
      if (upward) problems.push(`'${layer}' (tier ${from}) imports '${target}' (tier ${to}): a layer imports only layers drawn lower`);
    }
  }
  return problems;
}

/** Each layer a sketch names, with the line (0-based, within the block) where it first appears. */
function sketchPlaces(markdown: string, where: string): Map<string, { kind: Kind; line: number }> {
  const marker = markdown.split('\n').findIndex((l) => l.startsWith('<!-- layers-sketch'));
  assert.ok(marker >= 0, `${where} marks its sketch with <!-- layers-sketch ... -->`);
  const block = codeBlocks(markdown).find((b) => b.line > marker + 1);
  assert.ok(block, `${where}: a fenced sketch follows the marker`);
  const places = new Map<string, { kind: Kind; line: number }>();
  block.text.split('\n').forEach((text, line) => {
    for (const m of text.matchAll(/\bsrc\/([a-z0-9-]+)(\/|\.ts\b)/g)) {
      const [name, kind] = nameOf(m[1]! + m[2]!);
      if (!places.has(name)) places.set(name, { kind, line });
    }
  });
  return places;
}

/** A sketch against the table: every folder drawn, each layer where its tier says. */
function checkSketch(
  where: string,
  places: ReadonlyMap<string, { kind: Kind; line: number }>,
  rows: readonly Row[],
  allowed: Allowed,
  src: ReadonlyMap<string, Kind>,
): string[] {
  const problems = checkNames(
    where,
    [...places].map(([n, p]): [string, Kind] => [n, p.kind]),
    allowed,
    src,
  );
  for (const [name, kind] of src) if (kind === 'folder' && !places.has(name)) problems.push(`${where} does not draw src/${name}/`);
  const placed = [...places].map(([name, p]) => ({ name, line: p.line, tier: tierOf(name, rows) }));
  const core = placed.filter((p) => typeof p.tier === 'number');
  const coreTop = Math.min(...core.map((p) => p.line));
  const coreBottom = Math.max(...core.map((p) => p.line));
  for (const p of placed) {
    if (p.tier === 'entry' && p.line >= coreTop) problems.push(`${where} draws the entry point '${p.name}' inside or below the core stack`);
    if (p.tier === 'beneath' && p.line <= coreBottom) problems.push(`${where} draws '${p.name}' inside or above the core stack; it is beneath every layer`);
  }
  for (const [i, first] of core.entries()) {
    for (const second of core.slice(i + 1)) {
      const [a, b] = (first.tier as number) <= (second.tier as number) ? [first, second] : [second, first];
      if (a.tier === b.tier && a.line !== b.line)
        problems.push(`${where} draws '${a.name}' and '${b.name}' on different lines; they are one tier (${a.tier}), side by side`);
      if ((a.tier as number) < (b.tier as number) && a.line >= b.line)
        problems.push(`${where} draws '${a.name}' (tier ${a.tier}) level with or below '${b.name}' (tier ${b.tier})`);
    }
  }
  return problems;
}

const src = srcEntries(repoRoot);
const architecture = read('docs/architecture.md');
const rows = parseLayerTable(architecture);

describe('docs/architecture.md: the layer table', () => {
  it('is found, with a row per tier of the stack', () => {
    assert.ok(rows.length >= 15, `${rows.length} rows read`);
    for (const tier of ['entry', 'beneath', 1, 2, 3])
      assert.ok(
        rows.some((r) => r.tier === tier),
        `a row of tier ${tier}`,
      );
  });
  it("lists exactly the import checker's ALLOWED table", () => {
    assert.deepEqual(checkTableImports(rows, ALLOWED, src), []);
  });
  it('has tiers ALLOWED keeps: nothing imports upwards or within its core tier', () => {
    assert.deepEqual(checkTiers(rows, ALLOWED), []);
  });
});

describe('the architecture sketches', () => {
  for (const file of ['README.md', 'docs/architecture.md']) {
    it(`${file}: every folder of src/, each drawn where its tier says`, () => {
      assert.deepEqual(checkSketch(file, sketchPlaces(read(file), file), rows, ALLOWED, src), []);
    });
  }
});

describe('the checks can fail', () => {
  const sketch = (body: string): string => `<!-- layers-sketch -->\n\`\`\`\n${body}\n\`\`\`\n`;
  const good = read('README.md');
  it('gRPC stacked under HTTP is reported', () => {
    const wrong = good.replace('src/grpc/', 'gRPC').replace('  src/service/', '  src/grpc/  gRPC, stacked under HTTP\n  src/service/');
    const problems = checkSketch('sketch', sketchPlaces(wrong, 'sketch'), rows, ALLOWED, src);
    assert.ok(problems.includes("sketch draws 'http' and 'grpc' on different lines; they are one tier (1), side by side"), problems.join('\n'));
  });
  it('a folder src/ does not hold, and a folder not drawn, are reported', () => {
    const problems = checkSketch('sketch', sketchPlaces(sketch('src/main.ts\nsrc/http/ src/gprc/'), 'sketch'), rows, ALLOWED, src);
    assert.ok(problems.includes('sketch names src/gprc/, which src/ does not hold'), problems.join('\n'));
    assert.ok(problems.includes('sketch does not draw src/registry/'), problems.join('\n'));
  });
  it('a row that disagrees with ALLOWED, and an upward import, are reported', () => {
    const edited = rows.map((r) => (r.layer === 'store' ? { ...r, imports: ['config', 'observability', 'errors', 'registry'] } : r));
    assert.ok(checkTableImports(edited, ALLOWED, src).includes("row 'store' lists 'registry', which ALLOWED does not let it import"));
    const upward = { ...ALLOWED, scheduler: [...ALLOWED['scheduler']!, 'service'] };
    assert.ok(checkTiers(rows, upward).some((p) => p.startsWith("'scheduler' (tier 5) imports 'service' (tier 2)")));
  });
  it('a new root module that imports nothing needs no row, no mention and no sketch line', () => {
    const withClock = new Map(src).set('clock', 'file');
    const allowed = { ...ALLOWED, clock: [], scheduler: [...ALLOWED['scheduler']!, 'clock'], registry: [...ALLOWED['registry']!, 'clock'] };
    assert.deepEqual(checkTableImports(rows, allowed, withClock), []);
    assert.deepEqual(checkTiers(rows, allowed), []);
    assert.deepEqual(checkSketch('README.md', sketchPlaces(good, 'README.md'), rows, allowed, withClock), []);
  });
});
