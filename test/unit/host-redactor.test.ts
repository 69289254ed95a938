import assert from 'node:assert/strict';
import { it } from 'node:test';
import { HostRedactor } from '../../src/errors.js';

const redactor = new HostRedactor({ paths: ['/srv/models/'], cacheDir: '/var/cache/mme', bucket: 'acme-models', prefix: 'prod/v2/' });

it('cuts the source root to the model-relative path', () => {
  assert.equal(redactor.redact("open '/srv/models/a/1/model.onnx' failed"), "open 'a/1/model.onnx' failed");
  assert.equal(redactor.redact('root /srv/models is empty'), 'root <server directory> is empty');
  assert.equal(redactor.redact('/srv/models-other/x stays'), '/srv/models-other/x stays');
});

it('cuts a cache path to the path inside the package (entry names are internal)', () => {
  assert.equal(
    redactor.redact('Load model from /var/cache/mme/s3___acme_prod_a.tar.gz-1f/model/a/1/model.onnx failed'),
    'Load model from a/1/model.onnx failed',
  );
  assert.equal(redactor.redact('/var/cache/mme/.tmp-x1/entry.json'), 'entry.json');
});

it('cuts s3:// URIs to the object name, the quoted bucket and the prefix', () => {
  assert.equal(redactor.redact('no object s3://acme-models/prod/v2/team/a.tar.gz'), 'no object team/a.tar.gz');
  assert.equal(redactor.redact("the bucket 'acme-models' does not exist"), "the bucket '<bucket>' does not exist");
  assert.equal(redactor.redact('Bucket: acme-models, Key: prod/v2/a.tar.gz'), 'Bucket: <bucket>, Key: a.tar.gz');
  assert.equal(redactor.redact('listing s3://acme-models failed'), 'listing the model source failed');
});

it('cuts the prefix only where a key starts', () => {
  const short = new HostRedactor({ paths: [], bucket: 'b', prefix: 'v1/' });
  assert.equal(short.redact("model 'team/v1/x' not found; Key: v1/team/v1/x"), "model 'team/v1/x' not found; Key: team/v1/x");
});

it('leaves a bucket-like word that is not quoted or called a bucket', () => {
  const plain = new HostRedactor({ paths: [], bucket: 'models', prefix: '' });
  assert.equal(plain.redact('no models are loaded'), 'no models are loaded');
});

it('redacts every string of a details object', () => {
  assert.deepEqual(redactor.redactDetails({ tried: ['s3://acme-models/prod/v2/x.tgz'], n: 3, nested: { dir: '/srv/models/x' } }), {
    tried: ['x.tgz'],
    n: 3,
    nested: { dir: 'x' },
  });
});

it("keeps a network error's kind, not its peer, and cuts the S3 endpoint wherever it is named", () => {
  const viaEndpoint = new HostRedactor({ paths: [], bucket: 'b', prefix: '', endpoint: 'http://minio.internal:9000/' });
  assert.equal(viaEndpoint.redact('connect ECONNREFUSED 10.0.3.7:9000 (gave up)'), 'connect ECONNREFUSED (gave up)');
  assert.equal(viaEndpoint.redact('getaddrinfo ENOTFOUND minio.internal'), 'getaddrinfo ENOTFOUND');
  assert.equal(
    viaEndpoint.redact("Inaccessible host: `minio.internal' at http://minio.internal:9000/b/x"),
    "Inaccessible host: `the S3 endpoint' at the S3 endpoint/b/x",
  );
  assert.equal(viaEndpoint.redact('read ECONNRESET'), 'read ECONNRESET');
  assert.equal(viaEndpoint.redact('minio.internally'), 'minio.internally');
});
