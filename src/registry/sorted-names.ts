/**
 * @module registry/sorted-names
 * Names kept in code-unit order as they are added and removed, so a page of
 * them after a cursor costs a binary search and the page (GET /models with
 * next_page_token, the repository index), never a copy and sort of the whole
 * set. A cursor is the last name of the previous page: pages stay exact while
 * names come and go between them (a name added behind the cursor is not
 * seen, one added ahead of it is; none is seen twice).
 */

/** One page of names after a cursor, and how many names the page touched (the probes of its search and the names taken). */
export interface NamePage {
  readonly names: readonly string[];
  /** More names follow the page's last one. */
  readonly more: boolean;
  /** Work done for the page: names compared or taken. Independent of the set's size but for the search's log2. */
  readonly visited: number;
}

export class SortedNames {
  private readonly names: string[] = [];

  get size(): number {
    return this.names.length;
  }

  has(name: string): boolean {
    const i = this.bound(name).index;
    return this.names[i] === name;
  }

  /** Adds `name` (a name already there is left alone). */
  add(name: string): void {
    const { index } = this.bound(name);
    if (this.names[index] !== name) this.names.splice(index, 0, name);
  }

  delete(name: string): void {
    const { index } = this.bound(name);
    if (this.names[index] === name) this.names.splice(index, 1);
  }

  clear(): void {
    this.names.length = 0;
  }

  /** Up to `limit` names strictly after `after` (from the first when undefined). */
  page(after: string | undefined, limit: number): NamePage {
    let from = 0;
    let visited = 0;
    if (after !== undefined) {
      const found = this.bound(after, true);
      from = found.index;
      visited = found.probes;
    }
    const names = this.names.slice(from, from + limit);
    return { names, more: from + limit < this.names.length, visited: visited + names.length };
  }

  /** Every name, in order. */
  [Symbol.iterator](): IterableIterator<string> {
    return this.names[Symbol.iterator]();
  }

  /** The first index whose name is ≥ `name` (lower bound), or > `name` with `past` (upper bound). */
  private bound(name: string, past = false): { index: number; probes: number } {
    let lo = 0;
    let hi = this.names.length;
    let probes = 0;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      probes++;
      const here = this.names[mid]!;
      if (here < name || (past && here === name)) lo = mid + 1;
      else hi = mid;
    }
    return { index: lo, probes };
  }
}
