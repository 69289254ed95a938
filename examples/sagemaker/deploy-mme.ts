/**
 * @module examples/sagemaker/deploy-mme
 * Deploys onnx-mme as a SageMaker multi-model endpoint, invokes two models
 * with TargetModel, and tears everything down:
 *
 *   CreateModel (Mode: "MultiModel", ModelDataUrl = the S3 prefix)
 *   → CreateEndpointConfig → CreateEndpoint → wait until InService
 *   → InvokeEndpoint × targets → DeleteEndpoint → DeleteEndpointConfig → DeleteModel
 *
 * Usage (after `npm run build`; see examples/sagemaker/README.md):
 *   node dist/examples/sagemaker/deploy-mme.js \
 *     --image 123456789012.dkr.ecr.us-east-1.amazonaws.com/onnx-mme:cpu \
 *     --role arn:aws:iam::123456789012:role/onnx-mme-sagemaker \
 *     --models s3://my-model-bucket/onnx-models/ \
 *     --target add_sub.tar.gz --request add_sub.json \
 *     --target pipeline.tar.gz --request pipeline.json
 *
 * It needs AWS credentials with iam-policy.json's permissions. `--dry-run`
 * checks the arguments and request files and prints the requests it would
 * send, calling nothing: that is what the README's quick-start test runs.
 */
import { realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  CreateEndpointCommand,
  CreateEndpointConfigCommand,
  CreateModelCommand,
  DeleteEndpointCommand,
  DeleteEndpointConfigCommand,
  DeleteModelCommand,
  SageMakerClient,
  waitUntilEndpointDeleted,
  waitUntilEndpointInService,
  type CreateEndpointConfigCommandInput,
  type CreateEndpointInput,
  type CreateModelCommandInput,
  type ProductionVariantInstanceType,
} from '@aws-sdk/client-sagemaker';
import { InvokeEndpointCommand, SageMakerRuntimeClient, type InvokeEndpointCommandInput } from '@aws-sdk/client-sagemaker-runtime';

export interface DeployOptions {
  /** ECR URI of the onnx-mme image (docker/Dockerfile.cpu or .gpu), in the endpoint's region. */
  readonly image: string;
  /** Execution role SageMaker assumes: reads the model prefix, pulls the image, writes logs. */
  readonly roleArn: string;
  /** s3://bucket/prefix/ holding the .tar.gz archives (`onnx-mme push` puts them there). */
  readonly modelsPrefix: string;
  /** Model, endpoint-config and endpoint names. */
  readonly name: string;
  readonly instanceType: string;
  readonly instanceCount: number;
  /** Container environment (the server's variables, e.g. MME_LOG_LEVEL). */
  readonly environment: Readonly<Record<string, string>>;
}

/**
 * The container's environment before `--env`: nothing SageMaker-specific, since
 * SageMaker sets SAGEMAKER_MULTI_MODEL=true on a multi-model endpoint and the
 * server's defaults follow from it (examples/sagemaker/README.md says so; a test
 * checks both).
 */
export const DEFAULT_ENVIRONMENT: Readonly<Record<string, string>> = Object.freeze({ MME_LOG_LEVEL: 'info' });

/** The three create requests. Pure, so a test checks them without AWS. */
export function deploymentRequests(o: DeployOptions): {
  model: CreateModelCommandInput;
  endpointConfig: CreateEndpointConfigCommandInput;
  endpoint: CreateEndpointInput;
} {
  if (!/^s3:\/\/[^/]+\/(.+\/)?$/.test(o.modelsPrefix)) {
    throw new Error(`--models must be an S3 prefix ending in '/', e.g. s3://bucket/prefix/ (got '${o.modelsPrefix}')`);
  }
  return {
    model: {
      ModelName: o.name,
      ExecutionRoleArn: o.roleArn,
      PrimaryContainer: {
        Image: o.image,
        // SageMaker downloads each archive under ModelDataUrl on its first TargetModel
        // request and hands it to the container with POST /models; the container serves it.
        Mode: 'MultiModel',
        ModelDataUrl: o.modelsPrefix,
        Environment: { ...o.environment },
      },
    },
    endpointConfig: {
      EndpointConfigName: o.name,
      ProductionVariants: [
        {
          VariantName: 'AllTraffic',
          ModelName: o.name,
          // The SDK's enum of instance types; SageMaker itself validates the name.
          InstanceType: o.instanceType as ProductionVariantInstanceType,
          InitialInstanceCount: o.instanceCount,
        },
      ],
    },
    endpoint: { EndpointName: o.name, EndpointConfigName: o.name },
  };
}

/** One InvokeEndpoint with TargetModel (the key under ModelDataUrl). */
export function invocationRequest(endpointName: string, target: string, body: Uint8Array): InvokeEndpointCommandInput {
  return { EndpointName: endpointName, TargetModel: target, ContentType: 'application/json', Accept: 'application/json', Body: body };
}

interface Invocation {
  readonly target: string;
  readonly requestFile: string;
}

async function deploy(o: DeployOptions, invocations: readonly Invocation[], keep: boolean): Promise<void> {
  const sagemaker = new SageMakerClient({});
  const runtime = new SageMakerRuntimeClient({});
  const requests = deploymentRequests(o);
  const created: string[] = [];
  try {
    console.log(`creating model ${o.name} (MultiModel, ${o.modelsPrefix})`);
    await sagemaker.send(new CreateModelCommand(requests.model));
    created.push('model');
    await sagemaker.send(new CreateEndpointConfigCommand(requests.endpointConfig));
    created.push('endpoint-config');
    await sagemaker.send(new CreateEndpointCommand(requests.endpoint));
    created.push('endpoint');
    console.log(`waiting for endpoint ${o.name} to be InService (usually 5-10 minutes)`);
    await waitUntilEndpointInService({ client: sagemaker, maxWaitTime: 1800, minDelay: 30, maxDelay: 60 }, { EndpointName: o.name });

    for (const inv of invocations) {
      const body = await readFile(inv.requestFile);
      const started = Date.now();
      const res = await runtime.send(new InvokeEndpointCommand(invocationRequest(o.name, inv.target, body)));
      const text = new TextDecoder().decode(res.Body);
      console.log(`${inv.target} (${Date.now() - started} ms, first call includes the download and load): ${text}`);
    }
  } finally {
    if (keep) {
      console.log(`--keep: endpoint ${o.name} left running (delete the endpoint, endpoint config and model when done)`);
    } else {
      // Reverse order; each step runs even if an earlier one failed, so nothing billable is left behind.
      if (created.includes('endpoint')) {
        console.log(`deleting endpoint ${o.name}`);
        await sagemaker.send(new DeleteEndpointCommand({ EndpointName: o.name })).catch((err: unknown) => console.error(`DeleteEndpoint: ${String(err)}`));
        await waitUntilEndpointDeleted({ client: sagemaker, maxWaitTime: 900 }, { EndpointName: o.name }).catch((err: unknown) =>
          console.error(`waiting for deletion: ${String(err)}`),
        );
      }
      if (created.includes('endpoint-config')) {
        await sagemaker
          .send(new DeleteEndpointConfigCommand({ EndpointConfigName: o.name }))
          .catch((err: unknown) => console.error(`DeleteEndpointConfig: ${String(err)}`));
      }
      if (created.includes('model')) {
        await sagemaker.send(new DeleteModelCommand({ ModelName: o.name })).catch((err: unknown) => console.error(`DeleteModel: ${String(err)}`));
      }
    }
    sagemaker.destroy();
    runtime.destroy();
  }
}

const USAGE = `Usage: node dist/examples/sagemaker/deploy-mme.js --image <ecr-uri> --role <role-arn> --models s3://bucket/prefix/
         --target <archive> --request <request.json> [--target ... --request ...]
         [--name onnx-mme-demo] [--instance-type ml.m5.xlarge] [--instance-count 1] [--env KEY=VALUE ...] [--keep] [--dry-run]
Region and credentials: the AWS SDK's standard chain (AWS_REGION, AWS_PROFILE, ...).`;

async function main(argv: readonly string[]): Promise<void> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      image: { type: 'string' },
      role: { type: 'string' },
      models: { type: 'string' },
      target: { type: 'string', multiple: true },
      request: { type: 'string', multiple: true },
      name: { type: 'string', default: 'onnx-mme-demo' },
      'instance-type': { type: 'string', default: 'ml.m5.xlarge' },
      'instance-count': { type: 'string', default: '1' },
      env: { type: 'string', multiple: true },
      keep: { type: 'boolean', default: false },
      'dry-run': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const targets = values.target ?? [];
  const files = values.request ?? [];
  if (!values.image || !values.role || !values.models || targets.length === 0 || targets.length !== files.length) {
    throw new Error(`--image, --role, --models and one --request per --target are required\n${USAGE}`);
  }
  const environment: Record<string, string> = { ...DEFAULT_ENVIRONMENT };
  for (const kv of values.env ?? []) {
    const eq = kv.indexOf('=');
    if (eq <= 0) throw new Error(`--env takes KEY=VALUE, got '${kv}'`);
    environment[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  const options: DeployOptions = {
    image: values.image,
    roleArn: values.role,
    modelsPrefix: values.models,
    name: values.name,
    instanceType: values['instance-type'],
    instanceCount: Number(values['instance-count']),
    environment,
  };
  const invocations = targets.map((target, i) => ({ target, requestFile: path.resolve(files[i]!) }));
  if (values['dry-run']) {
    // Everything but the AWS calls: the requests as they would be sent, each request file read and parsed.
    const invokes = [];
    for (const inv of invocations) {
      const body = await readFile(inv.requestFile);
      JSON.parse(body.toString('utf8'));
      invokes.push({ ...invocationRequest(options.name, inv.target, body), Body: `${body.length} bytes from ${files[invocations.indexOf(inv)]}` });
    }
    console.log(JSON.stringify({ ...deploymentRequests(options), invocations: invokes }, null, 2));
    return;
  }
  await deploy(options, invocations, values.keep);
}

// Compared as real paths, so a symlinked checkout or dist/ still runs main.
if (process.argv[1] && realpathSync(path.resolve(process.argv[1])) === realpathSync(fileURLToPath(import.meta.url))) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
  });
}
