/**
 * No function in src/ is over 80 lines (a function's nested functions count
 * in it), except the ones listed here, each with its reason: declarative
 * tables, and functions other work of this wave is splitting. An entry that
 * is no longer long fails too, so the list only shrinks.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { longFunctions, longFunctionsIn } from '../../support/function-lengths.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const LIMIT = 80;

/** `file#name` (name as test/support/function-lengths.ts writes it) → why it may be longer. */
const ALLOWED: ReadonlyMap<string, string> = new Map<string, string>([]);

describe('function length', () => {
  it(`no function in src/ is over ${LIMIT} lines, except those allowed with a reason`, async () => {
    const long = await longFunctions(path.join(repoRoot, 'src'), LIMIT);
    const unexpected = long.filter((f) => !ALLOWED.has(`${f.file}#${f.name}`)).map((f) => `${f.file}:${f.line} ${f.name}: ${f.lines} lines`);
    assert.deepEqual(unexpected, [], `split these into named steps of at most ${LIMIT} lines`);
    const stillLong = new Set(long.map((f) => `${f.file}#${f.name}`));
    const stale = [...ALLOWED.keys()].filter((key) => !stillLong.has(key));
    assert.deepEqual(stale, [], `these are no longer over ${LIMIT} lines (or were renamed): remove them from ALLOWED`);
  });

  it('counts a function from its first line to its closing brace, nested functions and class members by their scope', () => {
    const body = (n: number): string => Array.from({ length: n - 2 }, (_, i) => `  const v${i} = ${i};`).join('\n');
    const text = [
      '/** A comment does not count. */',
      `export function exact(): void {\n${body(LIMIT)}\n}`,
      `export function over(): void {\n${body(LIMIT + 1)}\n}`,
      `class Holder {\n  method(): void {\n${body(LIMIT + 1)}\n  }\n}`,
      `const arrow = (): void => {\n${body(LIMIT + 1)}\n};`,
      `export function outer(): () => void {\n  return () => {\n${body(LIMIT + 1)}\n  };\n}`,
    ].join('\n');
    const found = longFunctionsIn('x.ts', text, LIMIT).map((f) => `${f.name} ${f.lines}`);
    assert.deepEqual(found, [`over ${LIMIT + 1}`, `Holder.method ${LIMIT + 1}`, `arrow ${LIMIT + 1}`, `outer ${LIMIT + 3}`, `outer.<anonymous> ${LIMIT + 1}`]);
  });
});
