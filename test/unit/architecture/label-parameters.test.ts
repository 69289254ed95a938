/**
 * The model's name is added to errors once, at a boundary (src/errors.ts
 * inModel/withModel), and logs get it from a value that carries the model's
 * identity (an entry's id, a load request, a handle) or a child logger bound
 * once: it is not threaded through the layers as a `label` string. At most
 * LIMIT parameters in src/ are named `label`.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { labelParameters, labelParametersIn } from '../../support/label-parameters.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const LIMIT = 10;

describe('label parameters', () => {
  it(`at most ${LIMIT} parameters in src/ are named label`, async () => {
    const found = await labelParameters(path.join(repoRoot, 'src'));
    const list = found.map((p) => `${p.file}:${p.line} ${p.owner}`).join('\n');
    assert.ok(
      found.length <= LIMIT,
      `${found.length} parameters named label (at most ${LIMIT}): pass the value that carries the model (an EntryId, the load request, the handle), ` +
        `name the model in errors at the boundary with withModel, or bind a child logger once:\n${list}`,
    );
  });

  it('counts every parameter named label, of functions, methods, constructors, arrows and function types, and nothing else', () => {
    const text = [
      'export function plain(label: string, other: string): void {}',
      'class Holder {',
      '  constructor(private readonly label: string) {}',
      '  method(label?: string): void {}',
      '}',
      'const arrow = (label: string): string => label;',
      'interface Deps { readonly run: (model: string, label: string) => void }',
      'function destructured({ label }: { label: string }): string { return label; }',
      'const fields = { label: "x" };',
      'function renamed(labelText: string): void {}',
    ].join('\n');
    const found = labelParametersIn('x.ts', text).map((p) => `${p.line} ${p.owner}`);
    assert.deepEqual(found, ['1 plain', '3 constructor', '4 method', '6 arrow', '7 run']);
  });
});
