/**
 * @module test/support/label-parameters
 * Finds the parameters named `label` in a TypeScript tree, with the
 * TypeScript compiler's own parser: every parameter of a function, method,
 * constructor, arrow or function type whose name is the identifier `label`
 * (a destructured `{ label }` is a field read, not a parameter, and does not count).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import ts from 'typescript';
import { tsFiles } from './function-lengths.js';

export interface LabelParameter {
  /** Path relative to the tree's parent, with forward slashes (e.g. src/registry/lifecycle.ts). */
  readonly file: string;
  /** 1-based line of the parameter. */
  readonly line: number;
  /** The function it belongs to: its name, or its kind where it has none (`ArrowFunction`, `FunctionType`). */
  readonly owner: string;
}

function ownerName(node: ts.Node): string {
  const named = (node as { name?: ts.Node }).name;
  if (named !== undefined && (ts.isIdentifier(named) || ts.isPrivateIdentifier(named))) return named.text;
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (
    parent !== undefined &&
    (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertySignature(parent)) &&
    ts.isIdentifier(parent.name)
  ) {
    return parent.name.text;
  }
  return ts.SyntaxKind[node.kind];
}

/** The `label` parameters of one file's text; `file` only names them. */
export function labelParametersIn(file: string, text: string): LabelParameter[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: LabelParameter[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isParameter(node) && ts.isIdentifier(node.name) && node.name.text === 'label') {
      const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
      found.push({ file, line, owner: ownerName(node.parent) });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Every `label` parameter under `dir`, by file then line. */
export async function labelParameters(dir: string): Promise<LabelParameter[]> {
  const base = path.dirname(dir);
  const found: LabelParameter[] = [];
  for (const file of await tsFiles(dir)) {
    const rel = path.relative(base, file).split(path.sep).join('/');
    found.push(...labelParametersIn(rel, await readFile(file, 'utf8')));
  }
  return found;
}
