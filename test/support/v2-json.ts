/**
 * @module test/support/v2-json
 * KServe v2 JSON request bodies for tests, in a module of their own so that a
 * test driving a separate server process does not load the server to build
 * one.
 */

/** A KServe v2 JSON input. */
export function input(name: string, datatype: string, shape: number[], data: unknown[]): Record<string, unknown> {
  return { name, datatype, shape, data };
}

/**
 * A KServe v2 JSON body for the examples' add_sub (FP32 [1, 16] INPUT0 and
 * INPUT1): INPUT0 is 0, 1, …, 15; INPUT1 the same, or `second` in every place.
 */
export function addSubBody(second?: number): { inputs: Record<string, unknown>[] } {
  const seq16 = Array.from({ length: 16 }, (_, i) => i);
  return { inputs: [input('INPUT0', 'FP32', [1, 16], seq16), input('INPUT1', 'FP32', [1, 16], second === undefined ? seq16 : seq16.map(() => second))] };
}
