/**
 * @module bench/lib/payload
 * The request every target gets: a KServe v2 JSON body with one FP32 input of
 * batch 1 and deterministic values, so every server and the raw ORT loop see
 * the same numbers.
 */

/** `n` deterministic values in [-1, 1], rounded to 4 decimals (compact, realistic JSON). */
export function inputData(n: number, seed = 12345): number[] {
  let a = seed >>> 0;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    // mulberry32
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    const r = ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    out.push(Math.round((r * 2 - 1) * 1e4) / 1e4);
  }
  return out;
}

/** `{"inputs":[{"name":"INPUT0","shape":[1,n],"datatype":"FP32","data":[...]}]}` */
export function v2Body(n: number, inputName = 'INPUT0'): string {
  return JSON.stringify({ inputs: [{ name: inputName, shape: [1, n], datatype: 'FP32', data: inputData(n) }] });
}
