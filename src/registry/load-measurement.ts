/**
 * @module registry/load-measurement
 * What a load added to the process, while loads run concurrently
 * (MME_LOAD_CONCURRENCY). The resident set is one figure for the whole
 * process, so a load's own growth is only its own when nothing else loaded
 * meanwhile. Loads that overlap form a group, from the moment the first of
 * them starts until the last ends: a load alone in its group is measured
 * exactly (its growth); the group's growth is shared among its loads in
 * proportion to their estimates when the group ends. Memory given back by
 * models released meanwhile (evictions that made room) is added back at
 * their booked size, so an eviction does not read as a load that took less.
 *
 * The estimates themselves are calibrated from these measurements: a
 * session's own cost beyond its files (weights) is the median of what
 * recent loads measured per session, so a load still in a group is booked
 * at what loads like it were seen to take, not at a fixed guess.
 */

/** Until something was measured: what a small CPU session was measured to hold beyond its files, rounded up (registry/package-size.ts). */
export const INITIAL_SESSION_OVERHEAD_BYTES = 1024 * 1024;
/** Recent per-session samples the calibration keeps. */
const SAMPLES = 64;

/** What a load holds, as the estimate sees it: its files held by sessions (each copy its own) and its session count. */
export interface LoadFootprint {
  readonly fileBytes: number;
  readonly sessions: number;
}

/** One load's measured section. */
export interface MeasureToken {
  /** Resolves with the load's share of its group's growth once the group ends (undefined: nothing could be read). */
  readonly settled: Promise<number | undefined>;
}

interface Member {
  readonly before: number;
  freed: number;
  footprint: LoadFootprint | undefined;
  resolve: (bytes: number | undefined) => void;
  ended: boolean;
}

interface Group {
  readonly before: number;
  freed: number;
  readonly members: Member[];
  active: number;
}

export class LoadMeasurement {
  private group: Group | undefined;
  private readonly tokens = new Map<MeasureToken, Member>();
  private readonly samples: number[] = [];
  private overhead = INITIAL_SESSION_OVERHEAD_BYTES;

  constructor(private readonly rssBytes: () => number) {}

  /** Bytes a session is estimated to hold beyond its files (the calibration's median). */
  get sessionOverheadBytes(): number {
    return this.overhead;
  }

  estimate(f: LoadFootprint): number {
    return f.fileBytes + f.sessions * this.overhead;
  }

  /** A load starts its measured section (session creation, warm-up, placement). */
  begin(): MeasureToken {
    const before = this.rssBytes();
    const group = (this.group ??= { before, freed: 0, members: [], active: 0 });
    let resolve!: (bytes: number | undefined) => void;
    const settled = new Promise<number | undefined>((r) => (resolve = r));
    const member: Member = { before, freed: 0, footprint: undefined, resolve, ended: false };
    group.members.push(member);
    group.active++;
    const token: MeasureToken = { settled };
    this.tokens.set(token, member);
    return token;
  }

  /**
   * The load's measured section ended (`footprint`: what it holds; undefined:
   * it failed and holds nothing). Returns its own growth when it was alone in
   * its group (exact); otherwise undefined, and `settled` resolves when the group ends.
   */
  end(token: MeasureToken, footprint: LoadFootprint | undefined): number | undefined {
    const member = this.tokens.get(token);
    const group = this.group;
    if (member === undefined || group === undefined || member.ended) return undefined;
    this.tokens.delete(token);
    member.ended = true;
    member.footprint = footprint;
    group.active--;
    const now = this.rssBytes();
    const alone = group.members.length === 1;
    if (group.active === 0) {
      this.group = undefined;
      this.settle(group, now);
    }
    return alone ? Math.max(0, now - member.before + member.freed) : undefined;
  }

  /** A model released `bytes` (its booking) while loads may be measured: their growth would read that much low. */
  released(bytes: number): void {
    if (this.group !== undefined) this.group.freed += bytes;
    for (const m of this.tokens.values()) m.freed += bytes;
  }

  private settle(group: Group, now: number): void {
    const growth = now - group.before + group.freed;
    const loaded = group.members.filter((m) => m.footprint !== undefined);
    const estimates = loaded.map((m) => this.estimate(m.footprint!));
    const total = estimates.reduce((a, b) => a + b, 0);
    if (!Number.isFinite(growth)) {
      for (const m of group.members) m.resolve(undefined);
      return;
    }
    const files = loaded.reduce((a, m) => a + m.footprint!.fileBytes, 0);
    const sessions = loaded.reduce((a, m) => a + m.footprint!.sessions, 0);
    // Only a group whose loads all held sessions calibrates (a failed load's transient would skew it).
    if (sessions > 0 && loaded.length === group.members.length) this.calibrate((Math.max(0, growth) - files) / sessions);
    for (const [i, m] of loaded.entries()) m.resolve(total > 0 ? Math.max(0, Math.round((growth * estimates[i]!) / total)) : 0);
    for (const m of group.members) if (m.footprint === undefined) m.resolve(undefined);
  }

  private calibrate(perSession: number): void {
    this.samples.push(Math.max(0, perSession));
    if (this.samples.length > SAMPLES) this.samples.shift();
    const sorted = [...this.samples].sort((a, b) => a - b);
    this.overhead = Math.round(sorted[Math.floor(sorted.length / 2)]!);
  }
}
