/**
 * `onnx-mme validate` as a user runs it (the built command, a child process)
 * on good and bad packages: each kind of problem the server finds at load is
 * found here too, with the server's message, every problem of a repository is
 * listed at once, and the exit code says which. Also the command-line contract
 * shared by every command (--help, usage errors → exit 2).
 */
import assert from 'node:assert/strict';
import { mkdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addSub, configText, ensembleRepository, packTarGz, writeModelDir, writeRepository } from '../../examples/models/zoo.js';
import { runCli } from '../support/cli.js';
import { tgz } from '../support/raw-tar.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';

const ctx = new Cleanups();
after(() => ctx.run());

interface JsonReport {
  ok: boolean;
  entry?: string;
  kind: string;
  fileBytes: number;
  predictedBytes: number;
  models: {
    name: string;
    platform: string;
    versions: number[];
    maxBatchSize: number;
    inputs: { name: string; datatype: string; shape: number[] }[];
    outputs: { name: string }[];
    fileBytes: number;
    autoCompleted: boolean;
    steps?: string[];
  }[];
  problems: { model?: string; code: string; message: string }[];
  notes: string[];
  peakResidentBytes: number;
}

async function validateJson(target: string, env: Record<string, string> = {}): Promise<{ code: number | null; report: JsonReport; stderr: string }> {
  const r = await runCli(['validate', target, '--json'], { env });
  return { code: r.code, report: JSON.parse(r.stdout) as JsonReport, stderr: r.stderr };
}

let root = '';
const mismatchConfig = configText({
  maxBatchSize: 8,
  inputs: [
    { name: 'INPUT0', dataType: 'FP32', dims: [16] },
    { name: 'INPUT9', dataType: 'FP32', dims: [16] },
  ],
  outputs: [{ name: 'OUTPUT0', dataType: 'INT32', dims: [16] }],
});

describe('onnx-mme validate', () => {
  before(async () => {
    root = await tempDir(ctx, 'onnx-mme-cli-validate-');
    await writeModelDir(root, 'add_sub', addSub());
    await writeModelDir(root, 'autocomplete', { onnx: addSub().onnx });
    await writeRepository(path.join(root, 'pipeline'), ensembleRepository().models);
    await packTarGz(path.join(root, 'add_sub'), path.join(root, 'add_sub.tar.gz'), { prefix: 'add_sub' });
    await packTarGz(path.join(root, 'add_sub'), path.join(root, 'add_sub_flat.tar.gz'));

    await writeModelDir(root, 'bad_pbtxt', {
      onnx: addSub().onnx,
      config: 'max_batch_size: 8\ninput [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }\noutput [ ]\n',
    });
    await writeModelDir(root, 'mismatch', { onnx: addSub().onnx, config: mismatchConfig });
    await writeModelDir(root, 'no_file', { config: addSub().config! });
    await writeModelDir(root, 'cuda_graphs', { onnx: addSub().onnx, config: `${addSub().config!}optimization { cuda { graphs: true } }\n` });
    await mkdir(path.join(root, 'not_onnx', '1'), { recursive: true });
    await writeFile(path.join(root, 'not_onnx', '1', 'model.onnx'), 'this is not a protobuf');
    const ens = ensembleRepository();
    // An ensemble whose step 0 names a model the package lacks, and one whose step 1 reads a tensor nothing produces.
    const ensembleConfig = ens.models['pipeline']!.config!;
    const ghost = ensembleConfig.replace('model_name: "preprocess"', 'model_name: "ghost"');
    const unwired = ensembleConfig.replace('value: "scaled" }\n      output_map', 'value: "nowhere" }\n      output_map');
    assert.ok(ghost !== ensembleConfig && unwired !== ensembleConfig);
    await writeRepository(path.join(root, 'bad_ensemble'), { ...ens.models, pipeline: { config: ghost, versions: [1] } });
    await writeRepository(path.join(root, 'unwired_ensemble'), { ...ens.models, pipeline: { config: unwired, versions: [1] } });
    await writeFile(path.join(root, 'corrupt.tar.gz'), Buffer.from('1f8b0800000000000003ffffffff', 'hex'));
    await writeFile(
      path.join(root, 'traversal.tar.gz'),
      tgz([
        { name: 'm/config.pbtxt', body: addSub().config! },
        { name: '../../escaped.txt', body: 'pwned' },
      ]),
    );
    await writeRepository(path.join(root, 'two_models'), { a: addSub(), b: addSub() });
    // One repository, several broken models: all of them reported in one run.
    await writeRepository(path.join(root, 'many'), {
      ...ens.models,
      preprocess: { ...ens.models['preprocess']!, config: ens.models['preprocess']!.config!.replace('TYPE_FP32', 'TYPE_INT32') },
      mismatch: { onnx: addSub().onnx, config: mismatchConfig },
      no_file: { config: addSub().config! },
      bad_pbtxt: { onnx: addSub().onnx, config: 'max_batch_size: 8\nmax_batch_sise: 4\n' },
    });
  });

  it('a single model directory: OK, exit 0, its tensors and a memory estimate from the model files', async () => {
    const r = await runCli(['validate', path.join(root, 'add_sub')]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /entry model: add_sub/);
    assert.match(r.stdout, /input {2}INPUT0 FP32 \[-1,16\]/);
    assert.match(r.stdout, /output OUTPUT1 FP32 \[-1,16\]/);
    assert.match(r.stdout, /memory: the server reserves 1\.\d+ MiB of MME_MEMORY_BUDGET_BYTES when it loads this package/);
    assert.match(r.stdout, /^OK: the server will load this package$/m);

    const { code, report } = await validateJson(path.join(root, 'add_sub'));
    assert.equal(code, 0);
    assert.equal(report.ok, true);
    assert.equal(report.entry, 'add_sub');
    const model = report.models[0]!;
    assert.deepEqual([model.name, model.platform, model.versions, model.maxBatchSize], ['add_sub', 'onnxruntime_onnx', [1], 8]);
    assert.deepEqual(
      model.inputs.map((t) => [t.name, t.datatype, t.shape]),
      [
        ['INPUT0', 'FP32', [-1, 16]],
        ['INPUT1', 'FP32', [-1, 16]],
      ],
    );
    assert.equal(model.fileBytes, (await stat(path.join(root, 'add_sub', '1', 'model.onnx'))).size);
    assert.equal(report.fileBytes, model.fileBytes);
    // The server's own prediction: every file of the package plus 1 MiB per ONNX session.
    const config = (await stat(path.join(root, 'add_sub', 'config.pbtxt'))).size;
    assert.equal(report.predictedBytes, model.fileBytes + config + 1024 * 1024);
    assert.ok(report.peakResidentBytes > model.fileBytes);
  });

  it('auto-complete, an ensemble repository and tarballs (model directory inside, config at the root) are valid', async () => {
    const auto = await validateJson(path.join(root, 'autocomplete'));
    assert.equal(auto.code, 0);
    assert.equal(auto.report.models[0]!.autoCompleted, true);
    assert.equal(auto.report.models[0]!.maxBatchSize, 4, "Triton's auto-complete default");
    const raised = await validateJson(path.join(root, 'autocomplete'), { MME_DEFAULT_MAX_BATCH_SIZE: '32' });
    assert.equal(raised.report.models[0]!.maxBatchSize, 32, 'completed as the server would with MME_DEFAULT_MAX_BATCH_SIZE');

    const ens = await validateJson(path.join(root, 'pipeline'));
    assert.equal(ens.code, 0, JSON.stringify(ens.report.problems));
    assert.equal(ens.report.entry, 'pipeline');
    assert.deepEqual(ens.report.models.find((m) => m.name === 'pipeline')!.steps, ['preprocess', 'classifier']);
    assert.deepEqual(ens.report.models.map((m) => m.name).sort(), ['classifier', 'pipeline', 'preprocess']);

    for (const archive of ['add_sub.tar.gz', 'add_sub_flat.tar.gz']) {
      const r = await validateJson(path.join(root, archive));
      assert.equal(r.code, 0, `${archive}: ${JSON.stringify(r.report.problems)}`);
      assert.equal(r.report.kind, 'archive');
    }
  });

  it("a Triton config with optimization.cuda.graphs: OK, the field listed as ignored (Triton's onnxruntime backend never reads it)", async () => {
    const r = await runCli(['validate', path.join(root, 'cuda_graphs')]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /ignored: optimization\.cuda\.graphs \(CUDA graph capture: Triton's onnxruntime backend never reads it/);
    assert.match(r.stdout, /^OK: the server will load this package$/m);
  });

  it('a bad config.pbtxt: the parser error with file:line:column, exit 1', async () => {
    const r = await runCli(['validate', path.join(root, 'bad_pbtxt')]);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /error \[INVALID_MODEL\] bad_pbtxt: bad_pbtxt\/config\.pbtxt:3:1: expected ',' or ']'/);
    assert.match(r.stdout, /^INVALID: the server would refuse to load this package$/m);
  });

  it('config vs graph mismatch: every mismatched tensor named', async () => {
    const { code, report } = await validateJson(path.join(root, 'mismatch'));
    assert.equal(code, 1);
    assert.equal(report.problems.length, 1);
    const msg = report.problems[0]!.message;
    assert.match(msg, /input 'INPUT9' is in config\.pbtxt but not in the ONNX model/);
    assert.match(msg, /output 'OUTPUT0': config\.pbtxt says INT32 but the ONNX model has FP32/);
    assert.match(msg, /ONNX model input 'INPUT1' is missing from config\.pbtxt/);
  });

  it('a missing model file, and a file onnxruntime cannot read', async () => {
    const missing = await validateJson(path.join(root, 'no_file'));
    assert.equal(missing.code, 1);
    assert.match(missing.report.problems[0]!.message, /'no_file' version 1 has no model\.onnx/);
    const garbage = await validateJson(path.join(root, 'not_onnx'));
    assert.equal(garbage.code, 1);
    assert.equal(garbage.report.problems[0]!.code, 'INVALID_MODEL');
    assert.match(garbage.report.problems[0]!.message, /onnxruntime cannot load/);
  });

  it('bad ensembles: a step model the package lacks; a tensor no step produces', async () => {
    const ghost = await validateJson(path.join(root, 'bad_ensemble'));
    assert.equal(ghost.code, 1);
    assert.equal(ghost.report.problems.length, 1);
    assert.match(ghost.report.problems[0]!.message, /ensemble 'pipeline' is invalid: step 0 \(model 'ghost'\): the package has no model 'ghost'/);
    assert.deepEqual(ghost.report.notes, ["model 'preprocess' is not used by the entry model 'pipeline': the server will not load it"]);

    const unwired = await validateJson(path.join(root, 'unwired_ensemble'));
    assert.equal(unwired.code, 1);
    assert.equal(unwired.report.problems.length, 1);
    assert.equal(unwired.report.problems[0]!.model, 'pipeline');
    assert.match(unwired.report.problems[0]!.message, /pipeline\/config\.pbtxt: .*step 1: input tensor\(s\) 'nowhere' are never produced/);
  });

  it('a corrupt and a hostile tarball: ARCHIVE_REJECTED, as the server answers', async () => {
    for (const [file, why] of [
      ['corrupt.tar.gz', /corrupt/],
      ['traversal.tar.gz', /\.\./],
    ] as const) {
      const { code, report } = await validateJson(path.join(root, file));
      assert.equal(code, 1, file);
      assert.equal(report.problems[0]!.code, 'ARCHIVE_REJECTED', file);
      assert.match(report.problems[0]!.message, why, file);
    }
  });

  it('two models and no ensemble checked as one package (--package): the entry model cannot be chosen', async () => {
    const r = await runCli(['validate', path.join(root, 'two_models'), '--json', '--package']);
    const { code, report } = { code: r.code, report: JSON.parse(r.stdout) as JsonReport };
    assert.equal(code, 1);
    assert.match(report.problems[0]!.message, /cannot choose the entry model: it has 2 models \(a, b\) and no ensemble/);
    assert.deepEqual(
      report.models.map((m) => m.name),
      ['a', 'b'],
      'the models themselves are still checked',
    );
  });

  it('a model source directory (2 good models, then 1 broken beside them): a table of every model, exit 0, then 1', async () => {
    const sourceDir = path.join(root, 'source');
    await writeRepository(sourceDir, { good_a: addSub(), good_b: addSub() });
    const ok = await runCli(['validate', sourceDir]);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    const lines = ok.stdout.split('\n');
    assert.match(lines[1]!, /^MODEL +RESULT +INPUTS +OUTPUTS +MEMORY$/);
    assert.match(ok.stdout, /^good_a +ok +INPUT0 FP32\[-1,16\], INPUT1 FP32\[-1,16\] +OUTPUT0 FP32\[-1,16\], OUTPUT1 FP32\[-1,16\] +1\.\d+ MiB$/m);
    assert.match(ok.stdout, /^good_b +ok /m);
    assert.match(ok.stdout, /^OK: the server will load each of the 2 models$/m);
    assert.doesNotMatch(ok.stdout, /MME_DEFAULT_MODEL|cannot choose/);

    await writeModelDir(sourceDir, 'broken', { config: addSub().config! });
    const bad = await runCli(['validate', sourceDir]);
    assert.equal(bad.code, 1);
    assert.match(bad.stdout, /^broken +error \(1 problem\) +- +- +-$/m);
    assert.match(bad.stdout, /^good_a +ok /m);
    assert.match(bad.stdout, /^ {2}error \[INVALID_MODEL\] broken: .*has no model\.onnx/m);
    assert.match(bad.stdout, /^INVALID: 1 of 3 models would be refused when loaded$/m);

    const json = JSON.parse((await runCli(['validate', sourceDir, '--json'])).stdout) as { ok: boolean; targets: { target: string; ok: boolean }[] };
    assert.deepEqual(
      json.targets.map((t) => [t.target, t.ok]),
      [
        ['broken', false],
        ['good_a', true],
        ['good_b', true],
      ],
    );
    assert.equal(json.ok, false);
  });

  it('every problem of a repository in one run, each model once', async () => {
    const { code, report } = await validateJson(path.join(root, 'many'));
    assert.equal(code, 1);
    const byModel = new Map(report.problems.map((p) => [p.model, p.message]));
    assert.match(byModel.get('bad_pbtxt')!, /bad_pbtxt\/config\.pbtxt:2:\d+: .*max_batch_sise/);
    assert.match(byModel.get('mismatch')!, /INPUT9/);
    assert.match(byModel.get('no_file')!, /has no model\.onnx/);
    assert.match(byModel.get('preprocess')!, /config\.pbtxt says INT32 but the ONNX model has FP32/);
    assert.match(byModel.get('pipeline')!, /not checked further: its step model 'preprocess' failed to load/);
    assert.equal(report.problems.length, 5);
    assert.deepEqual(
      report.models.map((m) => m.name),
      ['classifier'],
      'what loaded is still described',
    );
  });

  it('usage: --help for every command, exit 2 for a bad command line or a missing input', async () => {
    const overview = await runCli(['--help']);
    assert.equal(overview.code, 0);
    for (const command of ['validate', 'pack', 'push', 'invoke', 'models', 'serve']) {
      assert.match(overview.stdout, new RegExp(`^  ${command} `, 'm'));
      const help = await runCli([command, '--help']);
      assert.equal(help.code, 0, command);
      // serve's help is the server's own (src/config/serve-args.ts), the same for ./serve and onnx-mme serve.
      assert.match(help.stdout, command === 'serve' ? /^Usage: \.\/serve .*onnx-mme serve/ : new RegExp(`^Usage: onnx-mme ${command}`), command);
    }
    assert.equal((await runCli([])).code, 2);
    const unknown = await runCli(['frobnicate']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown command 'frobnicate'/);
    const misspelt = await runCli(['valdiate']);
    assert.equal(misspelt.code, 2);
    assert.match(misspelt.stderr, /^onnx-mme: unknown command 'valdiate'; did you mean 'validate'\?/);
    const missing = await runCli(['validate']);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /missing the package to validate/);
    const badOption = await runCli(['validate', root, '--bogus']);
    assert.equal(badOption.code, 2);
    assert.match(badOption.stderr, /Unknown option '--bogus'/);
    const nothing = await runCli(['validate', path.join(root, 'does-not-exist')]);
    assert.equal(nothing.code, 2);
    assert.match(nothing.stderr, /no such file or directory/);
  });
});
