/**
 * @module grpc/model-config-proto
 * The text of `model_config.proto` (Triton's `inference.ModelConfig`, which
 * ModelConfigResponse carries), printed from the descriptor config.pbtxt is
 * parsed with (config/model-config-schema.ts). One transcription of Triton's
 * message, not two: the file in src/grpc/proto/ is this function's output,
 * and a test fails when they differ (regenerate it with
 * `node dist/src/grpc/model-config-proto.js > src/grpc/proto/model_config.proto`).
 */
import { pathToFileURL } from 'node:url';
import { ModelConfigDescriptor } from '../config/model-config-schema.js';
import type { EnumDescriptor, FieldDescriptor, FieldKind, MessageDescriptor, ValueKind } from '../config/pbtxt/schema.js';

interface Node {
  readonly segment: string;
  message: MessageDescriptor | undefined;
  enumeration: EnumDescriptor | undefined;
  readonly children: Map<string, Node>;
}

const newNode = (segment: string): Node => ({ segment, message: undefined, enumeration: undefined, children: new Map() });

/** Every message and enum reachable from ModelConfig, placed in a tree by their dotted names. */
function collect(root: MessageDescriptor): Node {
  const top = newNode('');
  const seen = new Set<string>();
  const place = (name: string): Node => {
    let node = top;
    for (const segment of name.split('.')) {
      let child = node.children.get(segment);
      if (child === undefined) node.children.set(segment, (child = newNode(segment)));
      node = child;
    }
    return node;
  };
  const visitValue = (kind: ValueKind): void => {
    if (kind.type === 'enum' && !seen.has(kind.enum.name)) {
      seen.add(kind.enum.name);
      place(kind.enum.name).enumeration = kind.enum;
    } else if (kind.type === 'message') visitMessage(kind.message);
  };
  const visitMessage = (m: MessageDescriptor): void => {
    if (seen.has(m.name)) return;
    seen.add(m.name);
    place(m.name).message = m;
    for (const f of m.fields) visitValue(f.kind.type === 'map' ? f.kind.value : f.kind);
  };
  visitMessage(root);
  return top;
}

function typeName(kind: ValueKind): string {
  switch (kind.type) {
    case 'scalar':
      return kind.scalar;
    case 'enum':
      return kind.enum.name;
    case 'message':
      return kind.message.name;
  }
}

function fieldType(kind: FieldKind): string {
  return kind.type === 'map' ? `map<${kind.key}, ${typeName(kind.value)}>` : typeName(kind);
}

function fieldLine(f: FieldDescriptor): string {
  return `${f.repeated ? 'repeated ' : ''}${fieldType(f.kind)} ${f.name} = ${f.number};`;
}

function printEnum(e: EnumDescriptor, segment: string, indent: string, out: string[]): void {
  out.push(`${indent}enum ${segment} {`);
  for (const v of e.values) out.push(`${indent}  ${v.name} = ${v.number};`);
  out.push(`${indent}}`);
}

function printNode(node: Node, indent: string, out: string[]): void {
  if (node.enumeration !== undefined) {
    printEnum(node.enumeration, node.segment, indent, out);
    return;
  }
  const m = node.message;
  if (m === undefined) throw new Error(`model_config.proto: '${node.segment}' holds nested types but is not a message`);
  out.push(`${indent}message ${node.segment} {`);
  for (const child of node.children.values()) printNode(child, `${indent}  `, out);
  const printedOneofs = new Set<string>();
  for (const f of m.fields) {
    if (f.oneof === undefined) {
      out.push(`${indent}  ${fieldLine(f)}`);
      continue;
    }
    if (printedOneofs.has(f.oneof)) continue;
    printedOneofs.add(f.oneof);
    out.push(`${indent}  oneof ${f.oneof} {`);
    for (const member of m.fields.filter((g) => g.oneof === f.oneof)) out.push(`${indent}    ${fieldLine(member)}`);
    out.push(`${indent}  }`);
  }
  out.push(`${indent}}`);
}

export function modelConfigProtoText(): string {
  const out = [
    "// Triton's inference.ModelConfig (the message ModelConfigResponse carries).",
    '// Generated from src/config/model-config-schema.ts by src/grpc/model-config-proto.ts;',
    "// do not edit: a test compares this file with the generator's output.",
    'syntax = "proto3";',
    '',
    'package inference;',
    '',
  ];
  const tree = collect(ModelConfigDescriptor);
  for (const node of tree.children.values()) {
    printNode(node, '', out);
    out.push('');
  }
  return out.join('\n');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) process.stdout.write(modelConfigProtoText());
