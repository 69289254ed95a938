/**
 * @module bench/lib/results-dir
 * bench/results in the repository (gitignored), whether the bench runs from
 * dist/bench (compiled) or bench/: where run-all writes latest.{json,md} and
 * bench modules write files of their own (charts).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export function resultsDir(): string {
  const benchDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
  const repoRoot = path.basename(path.dirname(benchDir)) === 'dist' ? path.resolve(benchDir, '..', '..') : path.resolve(benchDir, '..');
  return path.join(repoRoot, 'bench', 'results');
}
