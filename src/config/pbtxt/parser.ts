/**
 * @module config/pbtxt/parser
 * Protobuf text format → Triton's JSON form, checked against a schema.
 *
 * The grammar is the protobuf text-format spec as the C++ TextFormat parser
 * (which Triton uses for config.pbtxt) accepts it: optional `;`/`,` after a
 * field, `:` required before scalar values and optional before messages,
 * `{…}` or `<…>` message values, `[…]` lists for repeated fields, maps as
 * repeated `{ key value }` entries. Unknown fields, a non-repeated field given
 * twice and two members of one oneof are errors, as in Triton.
 *
 * Output is protobuf JSON as Triton prints it: proto field names, enums as
 * names, maps as objects, 64-bit integers as numbers, and every field without
 * presence printed at its default. Errors are ServingError('INVALID_MODEL')
 * with `<source>:<line>:<column>:` in front.
 *
 * `printTextFormat` is the inverse: JSON form → text, in the layout of
 * Triton's own example configs.
 */
import { ServingError } from '../../errors.js';
import { describeToken, floatWordValue, Tokenizer, type Token } from './tokenizer.js';
import {
  defaultValue,
  describeKind,
  enumValueByName,
  enumValueByNumber,
  findField,
  integerProblem,
  isIntegerType,
  jsonFloat,
  printInteger,
  mapEntryDescriptor,
  withDefaults,
  enumHint,
  type EnumDescriptor,
  fieldHint,
  type FieldDescriptor,
  type IntegerType,
  type MessageDescriptor,
  type ScalarType,
  type ValueKind,
} from './schema.js';

/** Parses `text` as a `root` message; returns its JSON form (see module doc). */
export function parseTextFormat(text: string, root: MessageDescriptor, sourceName: string): Record<string, unknown> {
  const parser = new TextParser(new Tokenizer(text, sourceName));
  return withDefaults(parser.parseBody(root, undefined), root);
}

type Close = '}' | '>';

class TextParser {
  constructor(private readonly tokens: Tokenizer) {}

  /** Fields of one message up to `close` (or the end of input for the root). */
  parseBody(message: MessageDescriptor, close: Close | undefined, open?: Token): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    const seen = new Map<string, Token>();
    const oneofs = new Map<string, FieldDescriptor>();
    for (;;) {
      const token = this.tokens.peek();
      if (close === undefined && token.kind === 'eof') return out;
      if (token.kind === 'punct' && token.text === close) {
        this.tokens.next();
        return out;
      }
      if (token.kind === 'eof') {
        const where = open === undefined ? '' : ` opened at ${open.line}:${open.column}`;
        throw this.fail(token, `unexpected end of input: expected '${close}' to close message ${message.name}${where}`);
      }
      if (token.kind !== 'identifier') {
        if (token.kind === 'punct' && token.text === '[') {
          throw this.fail(token, `extension and Any fields ('[…]') are not supported; expected a field name of message ${message.name}`);
        }
        throw this.fail(token, `expected a field name of message ${message.name}, found ${describeToken(token)}`);
      }
      this.tokens.next();
      const f = findField(message, token.text);
      if (f === undefined) throw this.fail(token, `unknown field '${token.text}' in message ${message.name}${fieldHint(token.text, message)}`);
      this.checkOnce(f, token, seen, oneofs);
      this.parseField(message, f, token, out);
      const separator = this.tokens.peek();
      if (separator.kind === 'punct' && (separator.text === ';' || separator.text === ',')) this.tokens.next();
    }
  }

  /** A non-repeated field may appear once; a oneof may have one member set. */
  private checkOnce(f: FieldDescriptor, token: Token, seen: Map<string, Token>, oneofs: Map<string, FieldDescriptor>): void {
    if (!f.repeated && f.kind.type !== 'map') {
      const first = seen.get(f.name);
      if (first !== undefined) {
        throw this.fail(token, `non-repeated field '${f.name}' is specified more than once (first at ${first.line}:${first.column})`);
      }
      seen.set(f.name, token);
    }
    if (f.oneof !== undefined) {
      const other = oneofs.get(f.oneof);
      if (other !== undefined && other !== f) {
        throw this.fail(token, `field '${f.name}' is specified along with field '${other.name}', another member of oneof '${f.oneof}'`);
      }
      oneofs.set(f.oneof, f);
    }
  }

  private parseField(owner: MessageDescriptor, f: FieldDescriptor, nameToken: Token, out: Record<string, unknown>): void {
    const kind = f.kind;
    if (kind.type === 'message' || kind.type === 'map') {
      this.acceptPunct(':');
      const entry = kind.type === 'map' ? mapEntryDescriptor(owner, f) : kind.message;
      const add = (value: Record<string, unknown>): void => this.store(f, value, out);
      if (this.peekPunct('[')) {
        const list = this.tokens.next();
        if (!f.repeated && kind.type !== 'map') throw this.fail(list, `field '${f.name}' is not repeated; a list is not allowed`);
        this.initRepeated(f, out);
        this.parseList(() => add(this.parseMessageValue(f, entry)));
      } else {
        add(this.parseMessageValue(f, entry));
      }
      return;
    }
    const colon = this.tokens.peek();
    if (!(colon.kind === 'punct' && colon.text === ':')) {
      if (colon.kind === 'punct' && (colon.text === '{' || colon.text === '<')) {
        throw this.fail(colon, `field '${f.name}' is of type ${describeKind(kind)}, not a message`);
      }
      throw this.fail(colon, `expected ':' after field '${nameToken.text}', found ${describeToken(colon)}`);
    }
    this.tokens.next();
    // Map keys become JSON object keys: integer keys are kept as exact decimal strings, not rounded numbers.
    const exact = owner.mapEntry === true && f.name === 'key';
    if (this.peekPunct('[')) {
      const list = this.tokens.next();
      if (!f.repeated) throw this.fail(list, `field '${f.name}' is not repeated; a list is not allowed`);
      this.initRepeated(f, out);
      this.parseList(() => this.store(f, this.scalarValue(f, kind, exact), out));
    } else {
      this.store(f, this.scalarValue(f, kind, exact), out);
    }
  }

  /** `[` already consumed: `]` or values separated by `,` then `]` (no trailing comma, as in the spec). */
  private parseList(item: () => void): void {
    if (this.acceptPunct(']')) return;
    for (;;) {
      item();
      if (this.acceptPunct(',')) continue;
      const close = this.tokens.next();
      if (close.kind === 'punct' && close.text === ']') return;
      throw this.fail(close, `expected ',' or ']' in list, found ${describeToken(close)}`);
    }
  }

  /** `{ … }` or `< … >`. */
  private parseMessageValue(f: FieldDescriptor, message: MessageDescriptor): Record<string, unknown> {
    const open = this.tokens.next();
    if (open.kind === 'punct' && (open.text === '{' || open.text === '<')) {
      return this.parseBody(message, open.text === '{' ? '}' : '>', open);
    }
    throw this.fail(open, `expected '{' or '<' to start the value of field '${f.name}' (${describeKind(f.kind)}), found ${describeToken(open)}`);
  }

  /** So that `dims: [ ]` leaves an (empty) value, not nothing. */
  private initRepeated(f: FieldDescriptor, out: Record<string, unknown>): void {
    if (out[f.name] === undefined) out[f.name] = f.kind.type === 'map' ? {} : [];
  }

  private store(f: FieldDescriptor, value: unknown, out: Record<string, unknown>): void {
    if (f.kind.type === 'map') {
      const entry = value as Record<string, unknown>;
      const map = (out[f.name] ??= {}) as Record<string, unknown>;
      const key = entry['key'] ?? (f.kind.key === 'string' ? '' : f.kind.key === 'bool' ? false : 0);
      // Missing value: the value type's default. Last duplicate key wins, as in protobuf.
      map[String(key)] = entry['value'] ?? defaultValue(f.kind.value);
    } else if (f.repeated) {
      ((out[f.name] ??= []) as unknown[]).push(value);
    } else {
      out[f.name] = value;
    }
  }

  private scalarValue(f: FieldDescriptor, kind: ValueKind, exact: boolean): unknown {
    const token = this.tokens.next();
    if (kind.type === 'enum') return this.enumValue(f, kind.enum, token);
    if (kind.type === 'scalar') return this.typedValue(f, kind.scalar, token, exact);
    throw this.fail(token, `field '${f.name}' is a message`); // unreachable: messages are handled by parseField
  }

  private typedValue(f: FieldDescriptor, type: ScalarType, token: Token, exact: boolean): unknown {
    switch (type) {
      case 'string':
        if (token.kind === 'string') return token.value;
        throw this.expected(f, 'a string', token);
      case 'bool':
        if (token.kind === 'identifier') {
          if (token.text === 'true' || token.text === 'True' || token.text === 't') return true;
          if (token.text === 'false' || token.text === 'False' || token.text === 'f') return false;
        }
        if (token.kind === 'number' && !token.isFloat && (token.integer === 0n || token.integer === 1n) && !token.text.startsWith('-')) {
          return token.integer === 1n;
        }
        throw this.expected(f, 'a boolean (true, false, True, False, t, f, 1 or 0)', token);
      case 'float':
      case 'double':
        if (token.kind === 'number') return jsonFloat(token.value);
        if (token.kind === 'identifier') {
          const word = floatWordValue(token.text);
          if (word !== undefined) return jsonFloat(word);
        }
        throw this.expected(f, 'a number', token);
      default:
        return this.integerValue(f, type, token, exact);
    }
  }

  private integerValue(f: FieldDescriptor, type: IntegerType, token: Token, exact: boolean): number | string {
    if (token.kind !== 'number' || token.integer === undefined) throw this.expected(f, 'an integer', token);
    const problem = integerProblem(token.integer, type);
    if (problem !== undefined) throw this.fail(token, `${problem} for ${type} field '${f.name}'`);
    return exact ? String(token.integer) : Number(token.integer);
  }

  private enumValue(f: FieldDescriptor, descriptor: EnumDescriptor, token: Token): string {
    if (token.kind === 'identifier') {
      const value = enumValueByName(descriptor, token.text);
      if (value !== undefined) return value.name;
      throw this.fail(token, `unknown value '${token.text}' for enum ${descriptor.name} of field '${f.name}'${enumHint(token.text, descriptor)}`);
    }
    if (token.kind === 'number' && token.integer !== undefined) {
      const value = enumValueByNumber(descriptor, Number(token.integer));
      if (value !== undefined) return value.name;
      throw this.fail(token, `unknown number ${token.text} for enum ${descriptor.name} of field '${f.name}' (expected one of ${enumNames(descriptor)})`);
    }
    throw this.expected(f, `an enum ${descriptor.name} value`, token);
  }

  private peekPunct(text: string): boolean {
    const token = this.tokens.peek();
    return token.kind === 'punct' && token.text === text;
  }

  private acceptPunct(text: string): boolean {
    if (!this.peekPunct(text)) return false;
    this.tokens.next();
    return true;
  }

  private expected(f: FieldDescriptor, what: string, token: Token): ServingError {
    return this.fail(token, `field '${f.name}' expects ${what}, found ${describeToken(token)}`);
  }

  private fail(token: Token, message: string): ServingError {
    return this.tokens.error(token.line, token.column, message);
  }
}

function enumNames(descriptor: EnumDescriptor): string {
  return descriptor.values.map((v) => v.name).join(', ');
}

// ---- printing ---------------------------------------------------------------

/**
 * Writes a message in JSON form (as `parseTextFormat` or `decodeJsonForm`
 * return it) as text format. Fields at their proto3 default are left out
 * (parsing puts them back), except oneof members, whose presence matters.
 * Repeated messages use the `name [ { … }, { … } ]` list style of Triton's
 * docs; maps one `{ key … value … }` block per entry.
 */
export function printTextFormat(json: Readonly<Record<string, unknown>>, root: MessageDescriptor): string {
  const lines: string[] = [];
  printBody(json, root, '', lines);
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

function printBody(json: Readonly<Record<string, unknown>>, message: MessageDescriptor, indent: string, lines: string[]): void {
  for (const f of message.fields) {
    const value = json[f.name];
    if (value === undefined || value === null) continue;
    const kind = f.kind;
    if (kind.type === 'map') {
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        const key = kind.key === 'string' ? quote(k) : k;
        if (kind.value.type === 'message') {
          lines.push(`${indent}${f.name} {`, `${indent}  key: ${key}`);
          printMessage('value', v as Record<string, unknown>, kind.value.message, `${indent}  `, '', lines);
          lines.push(`${indent}}`);
        } else {
          lines.push(`${indent}${f.name} { key: ${key} value: ${formatScalar(v, kind.value)} }`);
        }
      }
    } else if (kind.type === 'message') {
      if (!f.repeated) {
        printMessage(f.name, value as Record<string, unknown>, kind.message, indent, '', lines);
        continue;
      }
      const items = value as Record<string, unknown>[];
      if (items.length === 0) continue;
      lines.push(`${indent}${f.name} [`);
      items.forEach((item, i) => printMessage('', item, kind.message, `${indent}  `, i < items.length - 1 ? ',' : '', lines));
      lines.push(`${indent}]`);
    } else if (f.repeated) {
      const items = value as unknown[];
      if (items.length > 0) lines.push(`${indent}${f.name}: [ ${items.map((v) => formatScalar(v, kind)).join(', ')} ]`);
    } else if (f.oneof !== undefined || !isDefault(value, kind)) {
      lines.push(`${indent}${f.name}: ${formatScalar(value, kind)}`);
    }
  }
}

/** `name { … }` (or a bare `{ … }` list item when name is ''), `{ }` when empty. */
function printMessage(
  name: string,
  json: Readonly<Record<string, unknown>>,
  message: MessageDescriptor,
  indent: string,
  suffix: string,
  lines: string[],
): void {
  const head = name === '' ? `${indent}{` : `${indent}${name} {`;
  const body: string[] = [];
  printBody(json, message, `${indent}  `, body);
  if (body.length === 0) lines.push(`${head} }${suffix}`);
  else lines.push(head, ...body, `${indent}}${suffix}`);
}

function isDefault(value: unknown, kind: ValueKind): boolean {
  if (kind.type === 'enum') return value === kind.enum.values[0]?.name || value === 0;
  return value === '' || value === false || value === 0;
}

function formatScalar(value: unknown, kind: ValueKind): string {
  if (typeof value === 'number' && kind.type === 'scalar' && isIntegerType(kind.scalar)) return printInteger(value, kind.scalar);
  if (typeof value === 'string') {
    if (kind.type === 'enum') return value;
    if (kind.type === 'scalar' && (kind.scalar === 'float' || kind.scalar === 'double')) {
      if (value === 'NaN') return 'nan';
      if (value === 'Infinity') return 'inf';
      if (value === '-Infinity') return '-inf';
    }
    return quote(value);
  }
  return String(value);
}

const ESCAPES: Readonly<Record<string, string>> = { '\\': '\\\\', '"': '\\"', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** A double-quoted literal: C escapes for quotes, backslash and control characters; other text as is (UTF-8). */
function quote(text: string): string {
  let out = '"';
  for (const ch of text) {
    const escaped = ESCAPES[ch];
    if (escaped !== undefined) out += escaped;
    else if (ch < ' ' || ch === '\x7f') out += `\\${ch.charCodeAt(0).toString(8).padStart(3, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}
