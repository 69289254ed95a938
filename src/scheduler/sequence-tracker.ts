/**
 * @module scheduler/sequence-tracker
 * What every sequence batcher of the server shares: the bound on live
 * sequences (MME_MAX_SEQUENCES; a start beyond it is refused with 429), and a
 * bounded memory of sequences that ended without their `sequence_end` (idle
 * timeout, model unload, a cancelled request), so the next request of such a
 * sequence is told why it has no live sequence instead of a bare "send
 * START". The memory survives a model's unload and reload (it lives in the
 * server, not in the model); it does not survive a restart of the process.
 */
import { retryAfter, ServingError } from '../errors.js';

/** Why a sequence ended; also the `reason` label of onnx_mme_sequence_ends_total. */
export type SequenceEndReason = 'end' | 'idle' | 'unload' | 'cancelled' | 'slot_timeout' | 'restart';

export const SEQUENCE_END_REASONS: readonly SequenceEndReason[] = ['end', 'idle', 'unload', 'cancelled', 'slot_timeout', 'restart'];

/** Ended sequences remembered for their messages; older ones are forgotten first. */
const ENDED_MEMORY = 4096;

export class SequenceTracker {
  private live = 0;
  private readonly ended = new Map<string, string>();

  constructor(readonly maxSequences: number) {
    if (!(maxSequences >= 1)) throw new RangeError(`maxSequences must be >= 1, got ${maxSequences}`);
  }

  get liveSequences(): number {
    return this.live;
  }

  /** Count a new sequence, or refuse it (OVERLOADED → 429) when the server holds its maximum. */
  admit(model: string): void {
    if (this.live >= this.maxSequences) {
      throw new ServingError(
        'OVERLOADED',
        `model '${model}': the server holds its maximum of ${this.maxSequences} live sequences (MME_MAX_SEQUENCES); end sequences with sequence_end or retry later`,
        { model, details: retryAfter() },
      );
    }
    this.live++;
  }

  release(): void {
    if (this.live > 0) this.live--;
  }

  /** Remember why `key` of `model` ended (shown to its next request). */
  noteEnded(model: string, key: string, why: string): void {
    const k = `${model}\u0000${key}`;
    this.ended.delete(k);
    this.ended.set(k, why);
    if (this.ended.size > ENDED_MEMORY) this.ended.delete(this.ended.keys().next().value!);
  }

  /** Why the sequence ended, if it ended on its own (not by its sequence_end) not long ago. */
  endedBecause(model: string, key: string): string | undefined {
    return this.ended.get(`${model}\u0000${key}`);
  }

  /** A new sequence with this id started: its old ending is no longer news. */
  forget(model: string, key: string): void {
    this.ended.delete(`${model}\u0000${key}`);
  }
}
