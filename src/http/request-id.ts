/**
 * @module http/request-id
 * Random (version 4) UUIDs for request ids, made from a pooled block of
 * entropy and decoded as one flat string. node's randomUUID pools its
 * entropy too, but joins the id from 20 pieces, which node then flattens
 * again when it checks the X-Request-Id header value: measured 0.20 µs per
 * id against 0.10 µs this way, on a path that runs once per request.
 */
import { randomFillSync } from 'node:crypto';

const IDS_PER_FILL = 128;
const entropy = Buffer.alloc(16 * IDS_PER_FILL);
let next = IDS_PER_FILL;

/** ASCII hex digits of each byte value: HEX_DIGITS[2b] and HEX_DIGITS[2b + 1]. */
const HEX_DIGITS = new Uint8Array(512);
for (let b = 0; b < 256; b++) {
  const hex = b.toString(16).padStart(2, '0');
  HEX_DIGITS[2 * b] = hex.charCodeAt(0);
  HEX_DIGITS[2 * b + 1] = hex.charCodeAt(1);
}

/** Where each of the 16 bytes goes in the 36-character text (8-4-4-4-12). */
const OFFSETS = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
const text = Buffer.alloc(36);
text[8] = text[13] = text[18] = text[23] = 0x2d; // '-'

/** A new random UUID, e.g. `c818f3f1-5b3c-4482-b810-970ce951686c`. */
export function newRequestId(): string {
  if (next === IDS_PER_FILL) {
    randomFillSync(entropy);
    next = 0;
  }
  const base = 16 * next++;
  for (let i = 0; i < 16; i++) {
    let b = entropy[base + i]!;
    if (i === 6)
      b = (b & 0x0f) | 0x40; // version 4
    else if (i === 8) b = (b & 0x3f) | 0x80; // RFC 4122 variant
    const at = OFFSETS[i]!;
    text[at] = HEX_DIGITS[2 * b]!;
    text[at + 1] = HEX_DIGITS[2 * b + 1]!;
  }
  return text.toString('latin1', 0, 36);
}
