/**
 * @module test/support/model-source-fixture
 * Builds a local model source the way users lay one out: tarballs (a model
 * directory inside, or config.pbtxt at the archive root), nested targets,
 * plain directories, an ensemble repository, and broken packages.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import {
  addSub,
  configText,
  ensembleRepository,
  identity,
  IDENTITY_TYPES,
  mlp,
  packTarGz,
  writeModelDir,
  writeRepository,
  type DenseModel,
  type EnsembleRepository,
} from '../../examples/models/zoo.js';
import { tgz } from './raw-tar.js';

export interface SourceFixture {
  readonly root: string;
  readonly mlp: DenseModel;
  readonly mlpOnnx: Uint8Array;
  readonly ensemble: EnsembleRepository;
}

export async function buildModelSource(root: string, work: string): Promise<SourceFixture> {
  await mkdir(root, { recursive: true });
  // add_sub.tar.gz: a model directory inside the archive (Triton's usual tarball).
  await writeModelDir(path.join(work, 'add_sub'), 'add_sub', addSub());
  await packTarGz(path.join(work, 'add_sub'), path.join(root, 'add_sub.tar.gz'));

  // mlp.tar.gz: config.pbtxt at the archive root (SageMaker's single-model tarball).
  const m = mlp({ in: 32, hidden: [64], out: 8, seed: 3 });
  await writeModelDir(work, 'mlp', m);
  await packTarGz(path.join(work, 'mlp'), path.join(root, 'mlp.tar.gz'));

  // team/pipeline.tar.gz: an ensemble repository, nested target.
  const ens = ensembleRepository();
  await writeRepository(path.join(work, 'pipeline'), ens.models);
  await packTarGz(path.join(work, 'pipeline'), path.join(root, 'team', 'pipeline.tar.gz'));

  // Plain directories: every datatype, auto-complete, two versions.
  for (const dt of IDENTITY_TYPES) await writeModelDir(root, `identity_${dt.toLowerCase()}`, identity(dt, [3]));
  await writeModelDir(root, 'autocomplete', { onnx: addSub().onnx });
  await writeModelDir(root, 'versions', { ...addSub(), versions: [1, 2] });

  // Broken packages.
  await writeModelDir(root, 'bad_syntax', {
    onnx: addSub().onnx,
    config: 'max_batch_size: 8\ninput [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }\noutput [ ]\n',
  });
  await writeModelDir(root, 'unknown_field', { onnx: addSub().onnx, config: 'max_batch_size: 8\nmax_batch_sise: 4\n' });
  await writeModelDir(root, 'mismatch', {
    onnx: addSub().onnx,
    config: configText({
      maxBatchSize: 8,
      inputs: [
        { name: 'INPUT0', dataType: 'FP32', dims: [16] },
        { name: 'INPUT9', dataType: 'FP32', dims: [16] },
      ],
      outputs: [{ name: 'OUTPUT0', dataType: 'INT32', dims: [16] }],
    }),
  });
  await mkdir(path.join(root, 'not_onnx', '1'), { recursive: true });
  await writeFile(path.join(root, 'not_onnx', '1', 'model.onnx'), 'this is not a protobuf');
  await writeFile(path.join(root, 'corrupt.tar.gz'), Buffer.from('1f8b0800000000000003ffffffff', 'hex'));
  // Hostile archives: a path that climbs out, an absolute path, a link to /etc/passwd, a device.
  const cfg = addSub().config!;
  await writeFile(
    path.join(root, 'traversal.tar.gz'),
    tgz([
      { name: 'm/config.pbtxt', body: cfg },
      { name: '../../escaped.txt', body: 'pwned' },
    ]),
  );
  await writeFile(path.join(root, 'absolute.tar.gz'), tgz([{ name: '/tmp/onnx-mme-absolute-escape.txt', body: 'pwned' }]));
  await writeFile(
    path.join(root, 'symlink.tar.gz'),
    tgz([
      { name: 'm/config.pbtxt', body: cfg },
      { name: 'm/1/model.onnx', type: '2', linkname: '/etc/passwd' },
    ]),
  );
  await writeFile(
    path.join(root, 'device.tar.gz'),
    tgz([
      { name: 'm/config.pbtxt', body: cfg },
      { name: 'm/dev', type: '3' },
    ]),
  );
  return { root, mlp: m, mlpOnnx: m.onnx, ensemble: ens };
}

/** The reference: run the same ONNX bytes directly in onnxruntime-node. */
export async function runDirect(onnx: Uint8Array, feeds: Record<string, ort.Tensor>): Promise<Record<string, ort.Tensor>> {
  const session = await ort.InferenceSession.create(Buffer.from(onnx));
  try {
    return await session.run(feeds);
  } finally {
    await session.release();
  }
}
