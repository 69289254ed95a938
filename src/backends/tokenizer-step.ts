/**
 * @module backends/tokenizer-step
 * `backend: "tokenizer"`: text (BYTES, one string per row) → `input_ids`,
 * `attention_mask`, `token_type_ids` from a Hugging Face `tokenizer.json`
 * shipped with the model (WordPiece, BPE, Unigram; normalizers,
 * pre-tokenizers and post-processors as the file declares them), with
 * `@huggingface/tokenizers` (pure JS, no download, nothing native).
 *
 * - The outputs are named by role: any of `input_ids`, `attention_mask`,
 *   `token_type_ids`, INT64 or INT32, dims `[max_length]` (or `[-1]` with
 *   padding `longest`).
 * - An optional second BYTES input is the pair text (`text_pair`: the
 *   post-processor's pair template, token_type_ids 1 on the second text).
 * - Truncation keeps the special tokens: the text's tokens are cut to
 *   max_length minus what the post-processor adds (for a pair, the longer
 *   text loses tokens first, as `longest_first`), then the template applies.
 * - Padding `max_length` (default when the output dims are fixed) pads every
 *   row to max_length, so every request has the same shape and the next
 *   model's batcher can merge them; `longest` pads to the longest row of the
 *   batch.
 *
 * Tokenizing a sentence takes microseconds, so it runs on the main thread.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import type { TensorConfig } from '../config/model-config-types.js';
import { formatShape, type NumericArray, type Tensor } from '../protocol/tensor.js';
import type { LoadedStep, StepLoadContext } from './step-backend.js';
import { INDEX_TYPES, invalidInput, requireInput, setNumber, StepParameters, throwIfProblems, typedArrayOf, wanted } from './step-support.js';

const ROLES = ['input_ids', 'attention_mask', 'token_type_ids'] as const;
type Role = (typeof ROLES)[number];

type Json = Record<string, unknown>;

interface Encoded {
  readonly ids: number[];
  readonly typeIds: number[];
}

/** Read a JSON file next to the model, or undefined when it is absent. */
async function readJson(file: string): Promise<Json | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  return JSON.parse(text) as Json;
}

function safeRelative(file: string): boolean {
  return !path.isAbsolute(file) && !file.split(/[\\/]/).includes('..');
}

/** The version directory's file if it exists, else the model directory's (Triton python models keep files in either). */
async function locate(ctx: StepLoadContext, file: string): Promise<{ path: string; json: Json } | undefined> {
  for (const dir of [ctx.versionDir, ctx.modelDir]) {
    const p = path.join(dir, file);
    const json = await readJson(p);
    if (json) return { path: p, json };
  }
  return undefined;
}

/** How texts become token rows: the step's parameters once checked. */
interface EncodeSettings {
  readonly maxLength: number;
  readonly padding: 'max_length' | 'longest';
  readonly truncation: boolean;
  readonly addSpecial: boolean;
}

export async function loadTokenizerStep(ctx: StepLoadContext): Promise<LoadedStep> {
  const { config } = ctx;
  const params = new StepParameters(config.parameters, 'tokenizer');
  const problems = params.problems;
  const tokenizerFile = params.string('tokenizer_file', 'tokenizer.json');
  const configFile = params.string('tokenizer_config_file', 'tokenizer_config.json');
  const { outputs, configured } = checkTensors(config, problems);
  const { tokenizerJson, tokenizerConfig } = await readTokenizerFiles(ctx, tokenizerFile, configFile, problems);
  const settings = encodeSettings(params, tokenizerJson, configured);
  let tokenizer: Tokenizer | undefined;
  if (tokenizerJson) {
    try {
      tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
    } catch (err) {
      problems.push(`${tokenizerFile} is not a tokenizer @huggingface/tokenizers can load: ${(err as Error).message}`);
    }
  }
  const filePadding = tokenizerJson?.['padding'] as { pad_id?: unknown } | null | undefined;
  const padDefault =
    typeof filePadding?.pad_id === 'number'
      ? filePadding.pad_id
      : (tokenizer?.token_to_id('[PAD]') ?? tokenizer?.token_to_id('<pad>') ?? tokenizer?.token_to_id('<|padding|>') ?? 0);
  const padId = params.int('pad_id', padDefault, 0);
  params.checkUnknown();
  throwIfProblems('tokenizer', problems);

  const [textIn, pairIn] = [config.input[0]!, config.input[1]];
  const encode = encoderFor(tokenizer!, settings, pairIn !== undefined);
  return {
    release: async () => {},
    execute: async (inputs, outputNames) => {
      const texts = textsOf(requireInput(inputs, textIn.name), textIn.name);
      const pairs = pairIn ? textsOf(requireInput(inputs, pairIn.name), pairIn.name) : undefined;
      if (pairs && pairs.length !== texts.length)
        throw invalidInput(`input '${pairIn!.name}' has ${pairs.length} texts but '${textIn.name}' has ${texts.length}`);
      const encoded = texts.map((t, i) => encode(t, pairs?.[i], i));
      const width = settings.padding === 'max_length' ? settings.maxLength : Math.max(1, ...encoded.map((e) => e.ids.length));
      return tokenTensors(encoded, width, padId, outputs, outputNames);
    },
  };
}

/** The inputs (one or two BYTES texts) and outputs (named by role, one sequence dim); the sequence length the outputs fix, -1 when free. */
function checkTensors(config: StepLoadContext['config'], problems: string[]): { outputs: Map<Role, TensorConfig>; configured: number } {
  if (config.input.length < 1 || config.input.length > 2) problems.push(`needs 1 BYTES input (the text) or 2 (text and pair text), got ${config.input.length}`);
  const batching = config.maxBatchSize > 0;
  for (const t of config.input) {
    if (t.dataType !== 'BYTES') problems.push(`input '${t.name}' must be BYTES (TYPE_STRING), got ${t.dataType}`);
    if (batching ? t.dims.length !== 1 || t.dims[0] !== 1 : t.dims.length !== 1) {
      problems.push(`input '${t.name}' dims must be ${batching ? '[ 1 ] (one text per row)' : '[ -1 ] (the texts)'}, got ${formatShape(t.dims)}`);
    }
  }
  const outputs = new Map<Role, TensorConfig>();
  for (const o of config.output) {
    const role = ROLES.find((r) => r === o.name);
    if (!role) {
      problems.push(`output '${o.name}' is not one of ${ROLES.join(', ')}`);
      continue;
    }
    outputs.set(role, o);
    if (!INDEX_TYPES.includes(o.dataType)) problems.push(`output '${o.name}' must be INT64 or INT32, got ${o.dataType}`);
    const want = batching ? 1 : 2;
    if (o.dims.length !== want)
      problems.push(`output '${o.name}' dims must be ${batching ? '[ max_length ]' : '[ -1, max_length ]'}, got ${formatShape(o.dims)}`);
  }
  if (config.output.length === 0) problems.push(`needs at least one output (${ROLES.join(', ')})`);
  const lengths = new Set([...outputs.values()].map((o) => o.dims.at(-1)!));
  if (lengths.size > 1)
    problems.push(`outputs disagree on the sequence length: ${[...outputs.values()].map((o) => `${o.name} ${formatShape(o.dims)}`).join(', ')}`);
  return { outputs, configured: [...lengths][0] ?? -1 };
}

/** tokenizer.json (required) and tokenizer_config.json (optional), both inside the model directory. */
async function readTokenizerFiles(
  ctx: StepLoadContext,
  tokenizerFile: string,
  configFile: string,
  problems: string[],
): Promise<{ tokenizerJson: Json | undefined; tokenizerConfig: Json }> {
  if (!safeRelative(tokenizerFile)) problems.push(`parameter tokenizer_file '${tokenizerFile}' must be a relative path inside the model directory`);
  if (!safeRelative(configFile)) problems.push(`parameter tokenizer_config_file '${configFile}' must be a relative path inside the model directory`);
  let tokenizerJson: Json | undefined;
  let tokenizerConfig: Json = {};
  try {
    if (safeRelative(tokenizerFile)) {
      tokenizerJson = (await locate(ctx, tokenizerFile))?.json;
      if (!tokenizerJson) problems.push(`${tokenizerFile} not found in the version directory or the model directory`);
    }
    if (safeRelative(configFile)) tokenizerConfig = (await locate(ctx, configFile))?.json ?? {};
  } catch (err) {
    problems.push(`cannot read the tokenizer files: ${(err as Error).message}`);
  }
  return { tokenizerJson, tokenizerConfig };
}

/** max_length, padding, truncation and special tokens: the parameters, defaulting to the outputs' dims and the file's truncation. */
function encodeSettings(params: StepParameters, tokenizerJson: Json | undefined, configured: number): EncodeSettings {
  const fileTruncation = tokenizerJson?.['truncation'] as { max_length?: unknown } | null | undefined;
  const defaultMax = configured > 0 ? configured : typeof fileTruncation?.max_length === 'number' ? fileTruncation.max_length : 512;
  const maxLength = params.int('max_length', defaultMax, 1, 1_000_000);
  const padding = params.choice('padding', ['max_length', 'longest'] as const, configured > 0 ? 'max_length' : 'longest');
  const truncation = params.bool('truncation', true);
  const addSpecial = params.bool('add_special_tokens', true);
  if (configured > 0 && configured !== maxLength) params.problems.push(`max_length ${maxLength} does not match the outputs' sequence dim ${configured}`);
  if (configured > 0 && padding === 'longest') params.problems.push(`padding longest needs the outputs' sequence dim to be -1, got ${configured}`);
  return { maxLength, padding, truncation, addSpecial };
}

/** Encodes one row (a text and its pair text, if any): truncated to fit max_length with the special tokens, then post-processed. */
function encoderFor(tok: Tokenizer, settings: EncodeSettings, hasPair: boolean): (text: string, pair: string | undefined, row: number) => Encoded {
  const { maxLength, truncation, addSpecial } = settings;
  // What the post-processor adds around one text (or a pair): the budget truncation leaves for it.
  const specials = (pair: boolean): number => (addSpecial ? postProcess(tok, [], pair ? [] : null, true).tokens.length : 0);
  const specialsSingle = specials(false);
  const specialsPair = hasPair ? specials(true) : 0;
  return (text, pair, row) => {
    let a = tok.tokenize(text, { add_special_tokens: false });
    let b = pair === undefined ? null : tok.tokenize(pair, { add_special_tokens: false });
    const budget = maxLength - (b ? specialsPair : specialsSingle);
    const over = a.length + (b?.length ?? 0) - budget;
    if (over > 0) {
      if (!truncation || budget < 0) {
        throw invalidInput(
          `row ${row} has ${a.length + (b?.length ?? 0) + (b ? specialsPair : specialsSingle)} tokens, more than max_length ${maxLength} (truncation is off)`,
        );
      }
      if (!b) {
        a = a.slice(0, budget);
      } else {
        // longest_first: take one token at a time from the longer text.
        let [la, lb] = [a.length, b.length];
        for (let i = 0; i < over; i++) {
          if (la >= lb) la--;
          else lb--;
        }
        a = a.slice(0, la);
        b = b.slice(0, lb);
      }
    }
    const processed = postProcess(tok, a, b, addSpecial);
    const ids = processed.tokens.map((t) => tok.token_to_id(t) ?? unknownId(tok));
    return { ids, typeIds: processed.token_type_ids ?? ids.map(() => 0) };
  };
}

/** The wanted role outputs, every row padded to `width`. */
function tokenTensors(
  encoded: readonly Encoded[],
  width: number,
  padId: number,
  outputs: ReadonlyMap<Role, TensorConfig>,
  outputNames: readonly string[],
): Map<string, Tensor> {
  const rows = encoded.length;
  const result = new Map<string, Tensor>();
  for (const [role, cfg] of outputs) {
    if (!wanted(outputNames, cfg.name)) continue;
    const data: NumericArray = typedArrayOf(cfg.dataType, rows * width);
    encoded.forEach((e, r) => {
      const base = r * width;
      for (let j = 0; j < width; j++) {
        const real = j < e.ids.length;
        const v = role === 'input_ids' ? (real ? e.ids[j]! : padId) : role === 'attention_mask' ? (real ? 1 : 0) : real ? e.typeIds[j]! : 0;
        setNumber(data, base + j, v);
      }
    });
    result.set(cfg.name, { datatype: cfg.dataType, shape: [rows, width], data });
  }
  return result;
}

function textsOf(t: Tensor, name: string): string[] {
  if (t.datatype !== 'BYTES' || !Array.isArray(t.data)) throw invalidInput(`input '${name}' must be BYTES text, got ${t.datatype}`);
  return t.data;
}

function unknownId(tok: Tokenizer): number {
  return (tok.model as unknown as { unk_token_id?: number } | null)?.unk_token_id ?? 0;
}

interface PostProcessed {
  readonly tokens: string[];
  readonly token_type_ids?: number[];
}

/** The tokenizer's post-processor (templates, [CLS]/[SEP]); without one, the tokens joined. */
function postProcess(tok: Tokenizer, a: string[], b: string[] | null, addSpecial: boolean): PostProcessed {
  const pp = tok.post_processor as unknown as { post_process(a: string[], b: string[] | null, add: boolean): PostProcessed } | null;
  if (pp) return pp.post_process(a, b, addSpecial);
  return { tokens: [...a, ...(b ?? [])], token_type_ids: [...a.map(() => 0), ...(b ?? []).map(() => 1)] };
}
