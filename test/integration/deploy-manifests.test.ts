/**
 * The deployment examples against the real server: every environment variable
 * the Kubernetes manifests set is one the server reads (and its value parses),
 * ports and probes line up, every probe path and the routes KServe uses answer
 * on a real server started with the manifests' settings; the SageMaker example
 * builds a MultiModel deployment, and its IAM policy allows every API it calls.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { loadServerConfig, SETTINGS } from '../../src/config/server-config.js';
import { addSub, writeModelDir } from '../../examples/models/zoo.js';
import { DEFAULT_ENVIRONMENT, deploymentRequests, invocationRequest } from '../../examples/sagemaker/deploy-mme.js';
import { parseYamlDocuments, type YamlValue } from '../support/mini-yaml.js';
import { Gateway } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/Gateway';
import { HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/HTTPRoute';
import { DestinationRule } from '@kubernetes-models/istio/networking.istio.io/v1/DestinationRule';
import { EnvoyFilter } from '@kubernetes-models/istio/networking.istio.io/v1alpha3/EnvoyFilter';
import { tempDir } from '../support/temp-dir.js';
import { asValues, call, connect, inferRequest } from '../support/grpc-client.js';
import { input, request, startTestServer } from '../support/test-server.js';

const buildRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const repoRoot = [path.resolve(buildRoot, '..'), process.cwd()].find((d) => existsSync(path.join(d, 'examples', 'kubernetes'))) ?? process.cwd();

type Obj = { [key: string]: YamlValue };

function obj(v: YamlValue | undefined, what: string): Obj {
  assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), `${what} must be a mapping`);
  return v as Obj;
}

function list(v: YamlValue | undefined, what: string): YamlValue[] {
  assert.ok(Array.isArray(v), `${what} must be a list`);
  return v;
}

interface Manifest {
  readonly file: string;
  readonly doc: Obj;
}

async function manifests(): Promise<Manifest[]> {
  const dir = path.join(repoRoot, 'examples', 'kubernetes');
  const out: Manifest[] = [];
  for (const file of (await readdir(dir)).filter((f) => f.endsWith('.yaml')).sort()) {
    for (const doc of parseYamlDocuments(await readFile(path.join(dir, file), 'utf8'))) out.push({ file, doc: obj(doc, file) });
  }
  return out;
}

function containersOf(m: Manifest): Obj[] {
  if (m.doc['kind'] !== 'Deployment' && m.doc['kind'] !== 'ServingRuntime') return [];
  const spec = obj(m.doc['spec'], `${m.file} spec`);
  if (m.doc['kind'] === 'Deployment')
    return list(obj(obj(spec['template'], 'template')['spec'], 'pod spec')['containers'], 'containers').map((c) => obj(c, 'container'));
  if (m.doc['kind'] === 'ServingRuntime') return list(spec['containers'], 'containers').map((c) => obj(c, 'container'));
  return [];
}

function envOf(container: Obj): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of list(container['env'] ?? [], 'env')) {
    const entry = obj(e, 'env entry');
    assert.equal(typeof entry['value'], 'string', `env ${String(entry['name'])}: quote values so Kubernetes receives strings`);
    env[String(entry['name'])] = String(entry['value']);
  }
  return env;
}

const GI = 1024 ** 3;

function quantityBytes(q: YamlValue | undefined): number {
  const m = /^(\d+)(Gi|Mi)$/.exec(String(q)) ?? assert.fail(`unsupported quantity ${String(q)}`);
  return Number(m[1]) * (m[2] === 'Gi' ? GI : 1024 ** 2);
}

describe('Kubernetes and KServe manifests', () => {
  it('the YAML reader: block and flow styles the manifests use; an error for anything it does not understand', () => {
    assert.deepEqual(parseYamlDocuments('a:\n- x\n- y: 1\n  z: ["q", 2]\nb: {}\nc: "s # kept" # dropped\nd:\n  - - n\n    - m\n---\ne: \'it\'\'s\'\n'), [
      { a: ['x', { y: 1, z: ['q', 2] }], b: {}, c: 's # kept', d: [['n', 'm']] },
      { e: "it's" },
    ]);
    for (const bad of ['a: &x 1', 'a:\n\tb: 1', 'a: [1, 2', 'a: 1\na: 2', 'a: |\n  text']) assert.throws(() => parseYamlDocuments(bad), /YAML line/, bad);
  });

  it('every container: env names the server reads, values it accepts, `serve`, ports and probes that line up, resources', async () => {
    const known = new Set(SETTINGS.flatMap((s) => s.env));
    const all = await manifests();
    const withContainers = all.filter((m) => containersOf(m).length > 0);
    assert.deepEqual(withContainers.map((m) => m.doc['kind']).sort(), ['Deployment', 'ServingRuntime']);
    for (const m of withContainers) {
      for (const c of containersOf(m)) {
        const where = `${m.file} ${String(c['name'])}`;
        const env = envOf(c);
        for (const name of Object.keys(env)) assert.ok(known.has(name), `${where}: env ${name} is not a server setting (src/config/server-config.ts SETTINGS)`);
        assert.doesNotThrow(() => loadServerConfig(env), `${where}: the server refuses these values`);
        assert.deepEqual(c['args'], ['serve'], `${where}: the image's ENTRYPOINT is onnx-mme; args must be ["serve"]`);
        const port = loadServerConfig(env).port;
        const grpcPort = loadServerConfig(env).grpcPort;
        const ports = list(c['ports'], `${where} ports`).map((p) => obj(p, 'port'));
        assert.deepEqual(
          ports.map((p) => p['containerPort']),
          grpcPort === undefined ? [port] : [port, grpcPort],
          `${where}: containerPort is the port the server listens on (then MME_GRPC_PORT's)`,
        );
        if (grpcPort !== undefined) assert.equal(ports[1]!['name'], 'h2c', `${where}: KServe and Knative know a gRPC port by the name h2c`);
        for (const probeName of ['readinessProbe', 'livenessProbe']) {
          const get = obj(obj(c[probeName], `${where} ${probeName}`)['httpGet'], `${probeName}.httpGet`);
          const p = get['port'];
          assert.ok(p === port || ports.some((x) => x['name'] === p), `${where}: ${probeName} port ${String(p)} is not the server's`);
          assert.ok(Number(obj(c[probeName], probeName)['timeoutSeconds'] ?? 1) <= 2, `${where}: a probe waits at most 2 s, like SageMaker's /ping`);
        }
        const resources = obj(c['resources'], `${where} resources`);
        assert.ok(obj(resources['requests'], 'requests')['cpu'], `${where}: CPU request`);
        assert.ok(obj(resources['limits'], 'limits')['memory'], `${where}: memory limit`);
        const cpu = Number(obj(resources['requests'], 'requests')['cpu']);
        assert.equal(env['MME_RUNTIME_WORKERS'], String(cpu), `${where}: runtime workers match the CPU request (Node sees the node's cores)`);
      }
    }
  });

  it('Deployment + Service: graceful shutdown, cache volume and budget, Service → container port', async () => {
    const all = await manifests();
    const deployment = all.find((m) => m.doc['kind'] === 'Deployment')!;
    const service = all.find((m) => m.doc['kind'] === 'Service')!;
    const account = all.find((m) => m.doc['kind'] === 'ServiceAccount')!;
    const podSpec = obj(obj(obj(deployment.doc['spec'], 'spec')['template'], 'template')['spec'], 'pod spec');
    const container = containersOf(deployment)[0]!;
    const env = envOf(container);
    const config = loadServerConfig(env);
    assert.ok(config.modelSource.startsWith('s3://'), 'the Deployment reads models from an S3 prefix');
    assert.ok(Number(podSpec['terminationGracePeriodSeconds']) * 1000 > config.shutdownTimeoutMs, 'Kubernetes must not kill before the drain ends');
    assert.equal(podSpec['serviceAccountName'], obj(account.doc['metadata'], 'metadata')['name']);

    const mounts = list(container['volumeMounts'], 'volumeMounts').map((v) => obj(v, 'mount'));
    const cacheMount = mounts.find((v) => v['mountPath'] === config.cacheDir);
    assert.ok(cacheMount, `MME_CACHE_DIR ${config.cacheDir} is a mounted volume`);
    const volume = list(podSpec['volumes'], 'volumes')
      .map((v) => obj(v, 'volume'))
      .find((v) => v['name'] === cacheMount['name'])!;
    const sizeLimit = quantityBytes(obj(volume['emptyDir'], 'emptyDir')['sizeLimit']);
    assert.ok(config.cacheMaxBytes !== undefined && config.cacheMaxBytes < sizeLimit, 'MME_CACHE_MAX_BYTES stays inside the volume');

    const podLabels = obj(obj(obj(obj(deployment.doc['spec'], 'spec')['template'], 'template')['metadata'], 'metadata')['labels'], 'labels');
    const selector = obj(obj(service.doc['spec'], 'spec')['selector'], 'selector');
    for (const [k, v] of Object.entries(selector)) assert.equal(podLabels[k], v, `Service selector ${k}`);
    const portNames = list(container['ports'], 'ports').map((p) => obj(p, 'port')['name']);
    for (const p of list(obj(service.doc['spec'], 'spec')['ports'], 'service ports')) {
      assert.ok(portNames.includes(obj(p, 'port')['targetPort']), 'Service targetPort names the container port');
    }
  });

  it('model routing: Gateway API and Istio objects valid against their published schemas, hashing on the target header with a bound, toward the Service', async () => {
    const all = await manifests();
    // The CRDs' own OpenAPI schemas, as @kubernetes-models packages them; validate() throws on a violation.
    const models: Record<string, new (data: never) => { validate(): void }> = {
      'gateway.networking.k8s.io/v1 Gateway': Gateway,
      'gateway.networking.k8s.io/v1 HTTPRoute': HTTPRoute,
      'networking.istio.io/v1 DestinationRule': DestinationRule,
      'networking.istio.io/v1alpha3 EnvoyFilter': EnvoyFilter,
    };
    const routing = all.filter((m) => /(gateway\.networking\.k8s\.io|istio\.io)\//.test(String(m.doc['apiVersion'])));
    assert.deepEqual(routing.map((m) => m.doc['kind']).sort(), ['DestinationRule', 'EnvoyFilter', 'Gateway', 'HTTPRoute']);
    for (const m of routing) {
      const Model = models[`${String(m.doc['apiVersion'])} ${String(m.doc['kind'])}`];
      assert.ok(Model, `${m.file}: no published schema known for ${String(m.doc['apiVersion'])} ${String(m.doc['kind'])}`);
      assert.doesNotThrow(() => new Model(m.doc as never).validate(), `${m.file} ${String(m.doc['kind'])}`);
    }
    const byKind = (kind: string): Obj => obj(routing.find((m) => m.doc['kind'] === kind)!.doc, kind);
    const specOf = (kind: string): Obj => obj(byKind(kind)['spec'], `${kind} spec`);
    // The validator is live: the same DestinationRule with a header name that is not a string is refused.
    const broken = structuredClone(byKind('DestinationRule')) as Obj;
    obj(obj(obj(obj(broken['spec'], 'spec')['trafficPolicy'], 'tp')['loadBalancer'], 'lb')['consistentHash'], 'ch')['httpHeaderName'] = 5;
    assert.throws(() => new DestinationRule(broken as never).validate(), /httpHeaderName must be string/);

    const service = all.find((m) => m.doc['kind'] === 'Service')!;
    const serviceName = String(obj(service.doc['metadata'], 'metadata')['name']);
    const servicePort = obj(list(obj(service.doc['spec'], 'spec')['ports'], 'ports')[0], 'port')['port'];
    const namespace = String(obj(byKind('DestinationRule')['metadata'], 'metadata')['namespace']);
    const fqdn = `${serviceName}.${namespace}.svc.cluster.local`;
    // Gateway → HTTPRoute → the Service.
    const route = specOf('HTTPRoute');
    assert.equal(obj(list(route['parentRefs'], 'parentRefs')[0], 'parentRef')['name'], obj(byKind('Gateway')['metadata'], 'metadata')['name']);
    const backend = obj(list(obj(list(route['rules'], 'rules')[0], 'rule')['backendRefs'], 'backendRefs')[0], 'backendRef');
    assert.deepEqual([backend['name'], backend['port']], [serviceName, servicePort]);
    // The hash: on the header the server routes by, for the Service's host.
    const dr = specOf('DestinationRule');
    assert.equal(dr['host'], fqdn);
    const hash = obj(obj(obj(dr['trafficPolicy'], 'trafficPolicy')['loadBalancer'], 'loadBalancer')['consistentHash'], 'consistentHash');
    assert.equal(String(hash['httpHeaderName']).toLowerCase(), 'x-amzn-sagemaker-target-model');
    // The bound: Envoy's hash_balance_factor on the gateway's cluster for the same Service and port.
    const patch = obj(list(specOf('EnvoyFilter')['configPatches'], 'configPatches')[0], 'configPatch');
    assert.equal(patch['applyTo'], 'CLUSTER');
    const cluster = obj(obj(patch['match'], 'match')['cluster'], 'cluster');
    assert.deepEqual([cluster['service'], cluster['portNumber']], [fqdn, servicePort]);
    const value = obj(obj(patch['patch'], 'patch')['value'], 'value');
    const factor = Number(obj(obj(value['common_lb_config'], 'common_lb_config')['consistent_hashing_lb_config'], 'chc')['hash_balance_factor']);
    assert.ok(factor > 100, `hash_balance_factor ${factor}: at 100 every replica is capped at the average, and affinity is lost`);

    // The pods: no sidecar (the drain is the server's), readiness on /ping fails within the drain, no preStop needed.
    const deployment = all.find((m) => m.doc['kind'] === 'Deployment')!;
    const template = obj(obj(deployment.doc['spec'], 'spec')['template'], 'template');
    assert.equal(obj(obj(template['metadata'], 'metadata')['annotations'], 'annotations')['sidecar.istio.io/inject'], 'false');
    const container = containersOf(deployment)[0]!;
    const readiness = obj(container['readinessProbe'], 'readinessProbe');
    assert.equal(obj(readiness['httpGet'], 'httpGet')['path'], '/ping');
    const drainMs = loadServerConfig(envOf(container)).drainMs;
    const notReadyWithinMs = Number(readiness['periodSeconds']) * Number(readiness['failureThreshold']) * 1000 + Number(readiness['timeoutSeconds']) * 1000;
    assert.ok(notReadyWithinMs < drainMs, `readiness fails after ${notReadyWithinMs} ms, not within MME_DRAIN_SECONDS (${drainMs} ms)`);
    assert.equal(
      obj(obj(container['livenessProbe'], 'livenessProbe')['httpGet'], 'httpGet')['path'],
      '/v2/health/live',
      'liveness must stay 200 through the drain',
    );
    assert.equal(container['lifecycle'], undefined, 'no preStop: the server drains on SIGTERM itself');
  });

  it('KServe: the InferenceService uses the ServingRuntime, its format and protocol', async () => {
    const all = await manifests();
    const runtime = all.find((m) => m.doc['kind'] === 'ServingRuntime')!;
    const isvc = all.find((m) => m.doc['kind'] === 'InferenceService')!;
    const rspec = obj(runtime.doc['spec'], 'spec');
    assert.deepEqual(rspec['protocolVersions'], ['v2']);
    assert.equal(containersOf(runtime)[0]!['name'], 'kserve-container');
    assert.equal(loadServerConfig(envOf(containersOf(runtime)[0]!)).modelSource, '/mnt/models', "KServe's storage initializer writes /mnt/models");
    const formats = list(rspec['supportedModelFormats'], 'formats').map((f) => obj(f, 'format')['name']);
    const model = obj(obj(obj(isvc.doc['spec'], 'spec')['predictor'], 'predictor')['model'], 'model');
    assert.equal(model['runtime'], obj(runtime.doc['metadata'], 'metadata')['name']);
    assert.ok(formats.includes(obj(model['modelFormat'], 'modelFormat')['name']));
    assert.equal(model['protocolVersion'], 'v2');
    assert.match(String(model['storageUri']), /^s3:\/\/[^/]+\/.+\/$/);
  });

  it('on a real server with the manifests’ settings: every probe path, /metrics and KServe v2 inference answer', async (t) => {
    const all = await manifests();
    const work = await tempDir(t, 'onnx-mme-manifests-');
    await writeModelDir(path.join(work, 'models'), 'add_sub', addSub());
    const paths = new Set<string>();
    for (const m of all.filter((x) => containersOf(x).length > 0)) {
      const c = containersOf(m)[0]!;
      for (const probe of ['readinessProbe', 'livenessProbe']) paths.add(String(obj(obj(c[probe], probe)['httpGet'], 'httpGet')['path']));
      const env = envOf(c);
      // The manifest's settings, with the model source and cache on this machine and a free loopback port.
      const server = await startTestServer({
        modelSource: path.join(work, 'models'),
        cacheDir: path.join(work, `cache-${m.file}`),
        env: {
          ...env,
          MME_MODEL_SOURCE: path.join(work, 'models'),
          MME_CACHE_DIR: path.join(work, `cache-${m.file}`),
          SAGEMAKER_BIND_TO_PORT: '0',
          MME_HOST: '127.0.0.1',
          ...(env['MME_GRPC_PORT'] === undefined ? {} : { MME_GRPC_PORT: '0' }),
        },
      });
      try {
        for (const p of paths) assert.equal((await request(`${server.url}${p}`)).status, 200, `${m.file}: GET ${p}`);
        // Where the manifest tells Prometheus to scrape.
        const annotations =
          m.doc['kind'] === 'Deployment'
            ? obj(obj(obj(obj(m.doc['spec'], 'spec')['template'], 'template')['metadata'], 'metadata')['annotations'], 'annotations')
            : obj(obj(m.doc['metadata'], 'metadata')['annotations'], 'annotations');
        const prefix = m.doc['kind'] === 'Deployment' ? 'prometheus.io' : 'prometheus.kserve.io';
        assert.equal(annotations[`${prefix}/port`], String(loadServerConfig(env).port), `${m.file}: scrape port`);
        assert.equal((await request(`${server.url}${String(annotations[`${prefix}/path`])}`)).status, 200, `${m.file}: scrape path`);
        const seq = Array.from({ length: 16 }, (_, i) => i);
        const body = { inputs: [input('INPUT0', 'FP32', [1, 16], seq), input('INPUT1', 'FP32', [1, 16], seq)] };
        const v2 = await request(`${server.url}/v2/models/add_sub/infer`, { method: 'POST', json: body });
        assert.equal(v2.status, 200, `${m.file}: KServe v2 infer: ${v2.text}`);
        assert.deepEqual(
          v2.body.outputs[0].data,
          seq.map((v) => 2 * v),
        );
        if (env['MME_GRPC_PORT'] !== undefined) {
          // The gRPC port the manifest exposes: health, and the same inference as tritonclient.grpc sends it.
          const grpc = connect(`127.0.0.1:${server.running.grpcPort}`);
          try {
            assert.equal((await call(grpc.health, 'Check', { service: '' })).response?.status, 'SERVING', `${m.file}: grpc.health.v1`);
            const r = await call(
              grpc.inference,
              'ModelInfer',
              inferRequest('add_sub', [
                { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], values: seq },
                { name: 'INPUT1', datatype: 'FP32', shape: [1, 16], values: seq },
              ]),
            );
            assert.equal(r.error, null, `${m.file}: gRPC ModelInfer: ${r.error?.details}`);
            assert.deepEqual(
              asValues(r.response, 'OUTPUT0')!.values,
              seq.map((v) => 2 * v),
            );
          } finally {
            grpc.close();
          }
        }
      } finally {
        await server.close();
      }
    }
    assert.ok(paths.has('/ping') && paths.has('/v2/health/ready'));
  });
});

describe('SageMaker example', () => {
  it('creates a MultiModel model on the S3 prefix, one variant, one endpoint; invokes with TargetModel', () => {
    const r = deploymentRequests({
      image: '123456789012.dkr.ecr.us-east-1.amazonaws.com/onnx-mme:cpu',
      roleArn: 'arn:aws:iam::123456789012:role/onnx-mme-sagemaker',
      modelsPrefix: 's3://my-model-bucket/onnx-models/',
      name: 'onnx-mme-demo',
      instanceType: 'ml.m5.xlarge',
      instanceCount: 1,
      environment: { MME_LOG_LEVEL: 'info' },
    });
    assert.equal(r.model.PrimaryContainer?.Mode, 'MultiModel');
    assert.equal(r.model.PrimaryContainer?.ModelDataUrl, 's3://my-model-bucket/onnx-models/');
    assert.doesNotThrow(() => loadServerConfig({ ...r.model.PrimaryContainer?.Environment }), 'the container environment is valid for the server');
    assert.equal(r.endpointConfig.ProductionVariants?.[0]?.ModelName, r.model.ModelName);
    assert.equal(r.endpoint.EndpointConfigName, r.endpointConfig.EndpointConfigName);
    const inv = invocationRequest('onnx-mme-demo', 'team/add_sub.tar.gz', new Uint8Array([123, 125]));
    assert.equal(inv.TargetModel, 'team/add_sub.tar.gz');
    assert.equal(inv.ContentType, 'application/json');
    const single = { image: 'x', roleArn: 'y', modelsPrefix: 's3://bucket/model.tar.gz', name: 'n', instanceType: 't', instanceCount: 1, environment: {} };
    assert.throws(() => deploymentRequests(single), /S3 prefix ending in '\/'/, 'a multi-model endpoint takes a prefix, not one archive');
  });

  it('iam-policy.json allows every SageMaker API the script calls; the execution role reads the prefix and pulls the image', async () => {
    const dir = path.join(repoRoot, 'examples', 'sagemaker');
    const script = await readFile(path.join(dir, 'deploy-mme.ts'), 'utf8');
    type Statement = { Action: string | string[]; Condition?: Record<string, Record<string, string>> };
    const actions = (file: string): Promise<{ actions: Set<string>; statements: Statement[] }> =>
      readFile(path.join(dir, file), 'utf8').then((text) => {
        const statements = (JSON.parse(text) as { Statement: Statement[] }).Statement;
        return { statements, actions: new Set(statements.flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]))) };
      });
    const deployer = await actions('iam-policy.json');
    const called = [...script.matchAll(/new (\w+)Command\(/g)].map((m) => `sagemaker:${m[1]}`);
    assert.ok(called.length >= 7);
    // The waiters poll DescribeEndpoint.
    for (const action of [...called, 'sagemaker:DescribeEndpoint']) assert.ok(deployer.actions.has(action), `iam-policy.json lacks ${action}`);
    const pass = deployer.statements.find((s) => [s.Action].flat().includes('iam:PassRole'));
    assert.equal(pass?.Condition?.['StringEquals']?.['iam:PassedToService'], 'sagemaker.amazonaws.com');
    // onnx-mme push: lib-storage's multipart calls are authorised by s3:PutObject; an abort by s3:AbortMultipartUpload.
    for (const action of ['s3:PutObject', 's3:AbortMultipartUpload']) assert.ok(deployer.actions.has(action), `iam-policy.json lacks ${action}`);

    const role = await actions('execution-role-policy.json');
    for (const action of [
      's3:GetObject',
      's3:ListBucket',
      'ecr:BatchGetImage',
      'ecr:GetDownloadUrlForLayer',
      'ecr:GetAuthorizationToken',
      'logs:PutLogEvents',
    ]) {
      assert.ok(role.actions.has(action), `execution-role-policy.json lacks ${action}`);
    }
    const trust = JSON.parse(await readFile(path.join(dir, 'execution-role-trust-policy.json'), 'utf8')) as {
      Statement: { Principal: { Service: string }; Action: string }[];
    };
    assert.equal(trust.Statement[0]!.Principal.Service, 'sagemaker.amazonaws.com');
    assert.equal(trust.Statement[0]!.Action, 'sts:AssumeRole');
  });

  it("the container's environment is what the README says; what follows from SageMaker's own variables is left to the server", async () => {
    const steps = await readFile(path.join(repoRoot, 'examples', 'sagemaker', 'README.md'), 'utf8');
    const said = /The container's environment is ((?:`[A-Z_]+=[^`]*`(?:, | and )?)+) plus your `--env`/.exec(steps.replace(/\s+/g, ' '));
    assert.ok(said, "examples/sagemaker/README.md says what the container's environment is");
    const listed = [...said[1]!.matchAll(/`([A-Z_]+)=([^`]*)`/g)].map((m) => [m[1]!, m[2]!]);
    assert.deepEqual(Object.fromEntries(listed), DEFAULT_ENVIRONMENT);
    // What SageMaker adds on a multi-model endpoint: the script leaves what follows from it to the server's defaults.
    const script = await readFile(path.join(repoRoot, 'examples', 'sagemaker', 'deploy-mme.ts'), 'utf8');
    assert.doesNotMatch(script, /MME_MODEL_URL_ROOTS|MME_MODEL_CONTROL/);
    assert.doesNotThrow(() => loadServerConfig({ ...DEFAULT_ENVIRONMENT, SAGEMAKER_MULTI_MODEL: 'true' }));
  });

  it('the steps upload the files they write, from one directory: every file:// and --request names a file a step wrote into $out', async () => {
    for (const doc of ['README.md', 'examples/sagemaker/README.md']) {
      const text = await readFile(path.join(repoRoot, doc), 'utf8');
      const blocks = [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
      // What the steps write into $out: `> "$out/name"`, `-o "$out/name"`, and the names a `for f in ...` loop writes as "$out/$f".
      const written = new Set<string>();
      for (const b of blocks) {
        for (const m of b.matchAll(/(?:>|-o) "\$out\/([\w.-]+)"/g)) written.add(m[1]!);
        const loop = /for f in ([^;]+); do[\s\S]*?> "\$out\/\$f"/.exec(b);
        for (const f of loop?.[1]!.trim().split(/\s+/) ?? []) written.add(f);
      }
      const used = blocks.flatMap((b) => [...b.matchAll(/(?:file:\/\/|--request |onnx-mme\.js push )("?[^\s"]+"?)/g)].map((m) => m[1]!));
      assert.ok(used.length > 0, `${doc}: no uploads found`);
      for (const u of used) {
        if (u.startsWith('s3://') || u.startsWith('examples/demo/')) continue; // an S3 prefix; a demo archive `npm run demo` built
        const m = /^\$out\/([\w.-]+)$/.exec(u.replaceAll('"', ''));
        assert.ok(m, `${doc}: ${u} is not a file the steps wrote into $out (a relative path assumes one directory)`);
        assert.ok(written.has(m[1]!), `${doc}: ${u} is uploaded but no step writes it`);
      }
    }
    // Every token of the policy files is one the fill-in step replaces.
    const steps = await readFile(path.join(repoRoot, 'examples', 'sagemaker', 'README.md'), 'utf8');
    for (const file of ['execution-role-trust-policy.json', 'execution-role-policy.json', 'iam-policy.json']) {
      const tokens = new Set((await readFile(path.join(repoRoot, 'examples', 'sagemaker', file), 'utf8')).match(/\b[A-Z][A-Z_]{3,}\b/g) ?? []);
      for (const t of tokens) assert.match(steps, new RegExp(`-e s[/#]${t}[/#]`), `${file}: the token ${t} is not filled in by the steps`);
    }
  });
});
