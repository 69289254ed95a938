/**
 * @module service/response-cache
 * Triton's response cache: for a model whose config says
 * `response_cache { enable: true }`, a request identical to an earlier
 * successful one (same loaded model and version, same inputs by name,
 * datatype, shape and bytes, same requested outputs) is answered from memory
 * without running the model. One cache serves every model, bounded by bytes
 * (MME_RESPONSE_CACHE_BYTES); least recently used answers go first.
 *
 * The key is a SHA-256 digest of those facts, as Triton keys on a hash of
 * them; with 256 bits a collision is not a practical concern (Triton's 64-bit
 * hash is), so inputs are not stored for comparison and a large input (an
 * image) costs only its digest. The inputs are sorted by name: JSON clients
 * do not agree on the order of `inputs`, and the model does not see it.
 *
 * The key also holds a number for the loaded package (not only its name and
 * version): a model reloaded with new weights under the same name (a changed
 * S3 object) must not be answered with the old model's outputs. Answers of an
 * unloaded package can no longer be found; they leave as the LRU needs room.
 *
 * Cached tensors are shared by every hit and never copied: nothing after the
 * run writes into output tensors (classification builds new ones; encoders
 * only read), and the map holding them is copied per hit.
 */
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Tensor } from '../protocol/tensor.js';

/** Bookkeeping per entry and per tensor, beyond the data bytes (objects, the key, the LRU's own nodes). */
const ENTRY_OVERHEAD_BYTES = 256;
const TENSOR_OVERHEAD_BYTES = 128;
/** V8 keeps a short string in about this much besides its characters. */
const STRING_OVERHEAD_BYTES = 32;

export interface ResponseCacheStats {
  readonly bytes: number;
  readonly entries: number;
  readonly evictions: number;
}

interface Entry {
  readonly outputs: readonly (readonly [string, Tensor])[];
  readonly bytes: number;
}

function tensorBytes(t: Tensor): number {
  const d = t.data;
  if (!Array.isArray(d)) return d.byteLength + TENSOR_OVERHEAD_BYTES;
  let n = TENSOR_OVERHEAD_BYTES;
  for (const s of d) n += 2 * s.length + STRING_OVERHEAD_BYTES;
  return n;
}

export class ResponseCache {
  private readonly lru: LRUCache<string, Entry>;
  private readonly generations = new WeakMap<object, number>();
  private nextGeneration = 1;
  private evicted = 0;

  /** `maxBytes` > 0; an answer larger than the whole budget is not kept. */
  constructor(readonly maxBytes: number) {
    this.lru = new LRUCache<string, Entry>({
      maxSize: maxBytes,
      maxEntrySize: maxBytes,
      sizeCalculation: (e) => e.bytes,
      dispose: (_e, _k, reason) => {
        if (reason === 'evict') this.evicted++;
      },
    });
  }

  /**
   * The key of a request to `pkg` (the loaded package object: its identity
   * separates one load of a model from the next), model `model` version
   * `version`.
   */
  keyOf(pkg: object, model: string, version: string, inputs: ReadonlyMap<string, Tensor>, wanted: readonly string[]): string {
    let generation = this.generations.get(pkg);
    if (generation === undefined) this.generations.set(pkg, (generation = this.nextGeneration++));
    const h = createHash('sha256');
    // Every variable-length field is length-prefixed, so no two different requests hash the same bytes.
    h.update(`${generation}\0${model.length}:${model}\0${version}\0${inputs.size}\0`);
    for (const name of [...inputs.keys()].sort()) {
      const t = inputs.get(name)!;
      h.update(`${name.length}:${name}\0${t.datatype}\0${t.shape.join(',')}\0`);
      const d = t.data;
      if (Array.isArray(d)) {
        // UTF-16 code units as they are: UTF-8 would turn every lone surrogate into the same U+FFFD.
        for (const s of d) {
          h.update(`${s.length}:`);
          h.update(s, 'utf16le');
        }
      } else {
        h.update(`${d.byteLength}\0`);
        h.update(new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
      }
    }
    h.update(`\0${wanted.length}`);
    for (const name of wanted) h.update(`\0${name.length}:${name}`);
    return h.digest('base64');
  }

  /** The cached outputs (a fresh map, in their original order), or undefined. */
  get(key: string): Map<string, Tensor> | undefined {
    const e = this.lru.get(key);
    return e === undefined ? undefined : new Map(e.outputs);
  }

  /** Keep a successful answer's outputs (the map is copied; the tensors are shared, read-only). */
  set(key: string, outputs: ReadonlyMap<string, Tensor>): void {
    let bytes = ENTRY_OVERHEAD_BYTES + key.length;
    for (const t of outputs.values()) bytes += tensorBytes(t);
    if (bytes > this.maxBytes) return;
    this.lru.set(key, { outputs: [...outputs], bytes });
  }

  stats(): ResponseCacheStats {
    return { bytes: this.lru.calculatedSize, entries: this.lru.size, evictions: this.evicted };
  }
}
