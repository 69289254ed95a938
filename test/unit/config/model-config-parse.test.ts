/**
 * config.pbtxt parsed off the main thread: a large config gives the same draft
 * from the worker as inline (frozen again), its errors keep their code and
 * `file:line:column`, and the size check names the model and the limit.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readModelConfigDraft } from '../../../src/config/model-config-draft.js';
import { checkConfigSize, INLINE_PARSE_CHARS, parseModelConfigDraft } from '../../../src/config/model-config-parse.js';
import { ServingError } from '../../../src/errors.js';

const options = { sourceName: 'm/config.pbtxt', directoryName: 'm' };
/** A valid config longer than the inline threshold (comments and an ignored parameter key). */
function bigConfig(extra = ''): string {
  const pad = `# ${'x'.repeat(INLINE_PARSE_CHARS)}\n`;
  return `name: "m"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 4\n${pad}parameters { key: "note" value: { string_value: "${'y'.repeat(1000)}" } }\n${extra}`;
}

describe('parseModelConfigDraft', () => {
  it('a large config parsed in the worker gives the inline draft, frozen', async () => {
    const text = bigConfig();
    assert.ok(text.length > INLINE_PARSE_CHARS);
    const fromWorker = await parseModelConfigDraft(text, options);
    assert.deepEqual(fromWorker, readModelConfigDraft(text, options));
    assert.ok(Object.isFrozen(fromWorker) && Object.isFrozen(fromWorker.json) && Object.isFrozen(fromWorker.parameters));
    // Concurrent parses share the one thread and each gets its own answer.
    const names = await Promise.all(
      ['a', 'b', 'c'].map((n) =>
        parseModelConfigDraft(bigConfig().replace('name: "m"', `name: "${n}"`), { sourceName: `${n}/config.pbtxt`, directoryName: n }),
      ),
    );
    assert.deepEqual(
      names.map((d) => d.name),
      ['a', 'b', 'c'],
    );
  });

  it("a large config's error comes back as the same ServingError, with file:line:column", async () => {
    const text = bigConfig('max_batch_size: "four"\n');
    const inline = (() => {
      try {
        readModelConfigDraft(text, options);
      } catch (err) {
        return err as ServingError;
      }
      return undefined;
    })();
    assert.ok(inline instanceof ServingError);
    await assert.rejects(parseModelConfigDraft(text, options), (err: unknown) => {
      assert.ok(err instanceof ServingError);
      assert.equal(err.code, inline.code);
      assert.equal(err.message, inline.message);
      assert.match(err.message, /m\/config\.pbtxt:\d+:\d+/);
      return true;
    });
  });

  it('a small config is parsed inline (no thread for the usual few-KiB config)', async () => {
    const draft = await parseModelConfigDraft('name: "m"\nplatform: "onnxruntime_onnx"\n', options);
    assert.equal(draft.platform, 'onnxruntime_onnx');
    assert.deepEqual(await parseModelConfigDraft(undefined, options), readModelConfigDraft(undefined, options));
  });
});

describe('checkConfigSize', () => {
  it('passes at the limit and refuses past it with INVALID_MODEL naming the file, the size and the limit', () => {
    checkConfigSize(1024, 1024, 'm/config.pbtxt');
    assert.throws(
      () => checkConfigSize(1025, 1024, 'm/config.pbtxt'),
      (err: unknown) =>
        err instanceof ServingError &&
        err.code === 'INVALID_MODEL' &&
        err.model === undefined &&
        /^m\/config\.pbtxt is 1025 bytes, over the limit of 1024 bytes .*MME_CONFIG_MAX_BYTES/.test(err.message),
    );
  });
});
