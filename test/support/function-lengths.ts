/**
 * @module test/support/function-lengths
 * Finds the functions of a TypeScript tree longer than a limit, with the
 * TypeScript compiler's own parser: a function's length runs from the line
 * of its first token (its comment not counted) to the line of its closing
 * brace, so a function's nested functions count in it too.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import ts from 'typescript';

export interface LongFunction {
  /** Path relative to the tree's parent, with forward slashes (e.g. src/server.ts). */
  readonly file: string;
  /** The enclosing classes and named functions, then the function's own name, joined by dots (`<anonymous>` where it has none). */
  readonly name: string;
  /** 1-based line of its first token. */
  readonly line: number;
  readonly lines: number;
}

/** A function's own name: its declared name, or the variable, property or class member it is assigned to. */
function ownName(node: ts.SignatureDeclaration): string | undefined {
  if (node.name !== undefined && !ts.isComputedPropertyName(node.name)) return node.name.getText();
  const parent = node.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && ts.isIdentifier(parent.name)) {
    return parent.name.text;
  }
  return undefined;
}

/** The long functions of one file's text; `file` only labels them. */
export function longFunctionsIn(file: string, text: string, limit: number): LongFunction[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: LongFunction[] = [];
  const visit = (node: ts.Node, scope: readonly string[]): void => {
    let inner = scope;
    if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) {
      inner = [...scope, node.name?.text ?? '<anonymous class>'];
    } else if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const name = ownName(node) ?? '<anonymous>';
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.end).line;
      const lines = last - first + 1;
      inner = [...scope, name];
      if (lines > limit) found.push({ file, name: inner.join('.'), line: first + 1, lines });
    }
    ts.forEachChild(node, (child) => visit(child, inner));
  };
  visit(source, []);
  return found;
}

/** Every TypeScript source under `dir` (declaration files left out), sorted. */
export async function tsFiles(dir: string): Promise<string[]> {
  const files: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) files.push(...(await tsFiles(full)));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) files.push(full);
  }
  return files.sort();
}

/** Every function under `dir` longer than `limit` lines, by file then line. */
export async function longFunctions(dir: string, limit: number): Promise<LongFunction[]> {
  const base = path.dirname(dir);
  const found: LongFunction[] = [];
  for (const file of await tsFiles(dir)) {
    const rel = path.relative(base, file).split(path.sep).join('/');
    found.push(...longFunctionsIn(rel, await readFile(file, 'utf8'), limit));
  }
  return found;
}
