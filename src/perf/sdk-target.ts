/**
 * @module perf/sdk-target
 * A real SageMaker endpoint as the target: InvokeEndpoint through
 * @aws-sdk/client-sagemaker-runtime (`--endpoint-name`, `--target-model`),
 * so the numbers include what a SageMaker client pays (SigV4 signing, the
 * SDK's own handler). The SDK is loaded only when this target is chosen.
 *
 * Retries are off (maxAttempts 1): a run counts exactly the requests it
 * makes, and an error is reported with the status the endpoint answered,
 * not hidden behind a retry. The endpoint URL may be given (a local server's
 * /endpoints/{name}/invocations route, a VPC endpoint); credentials and
 * region come from the usual AWS chain.
 */
import http from 'node:http';
import https from 'node:https';
import type { PreparedRequest, Target } from './http-target.js';
import { sagemakerContentType } from './http-target.js';

export interface SdkTargetOptions {
  readonly endpointName: string;
  readonly targetModel?: string;
  /** SageMaker Runtime endpoint URL; undefined = the SDK's default for the region. */
  readonly endpointUrl?: string;
  readonly region?: string;
}

const SAMPLE_CHARS = 300;

export async function createSdkTarget(options: SdkTargetOptions): Promise<Target> {
  const { SageMakerRuntimeClient, InvokeEndpointCommand } = await import('@aws-sdk/client-sagemaker-runtime');
  const agentOptions = { keepAlive: true, maxSockets: Infinity };
  const httpAgent = new http.Agent(agentOptions);
  const httpsAgent = new https.Agent(agentOptions);
  const client = new SageMakerRuntimeClient({
    maxAttempts: 1,
    ...(options.endpointUrl === undefined ? {} : { endpoint: options.endpointUrl }),
    ...(options.region === undefined ? {} : { region: options.region }),
    requestHandler: { httpAgent, httpsAgent },
  });
  const errorSamples = new Map<string, string>();
  return {
    description: `SageMaker InvokeEndpoint ${options.endpointName}${options.targetModel === undefined ? '' : ` (TargetModel ${options.targetModel})`}${options.endpointUrl === undefined ? '' : ` at ${options.endpointUrl}`}`,
    errorSamples,
    prepare(payload): PreparedRequest {
      return { path: '', headers: { 'content-type': sagemakerContentType(payload) }, body: payload.body };
    },
    async send(prepared, timeoutMs) {
      try {
        await client.send(
          new InvokeEndpointCommand({
            EndpointName: options.endpointName,
            ...(options.targetModel === undefined ? {} : { TargetModel: options.targetModel }),
            ContentType: String(prepared.headers['content-type']),
            Body: prepared.body,
          }),
          { abortSignal: AbortSignal.timeout(timeoutMs) },
        );
        return '200';
      } catch (err) {
        const e = err as Error & { $metadata?: { httpStatusCode?: number }; code?: string };
        const status =
          e.$metadata?.httpStatusCode !== undefined
            ? String(e.$metadata.httpStatusCode)
            : e.name === 'AbortError' || e.name === 'TimeoutError'
              ? 'timeout'
              : (e.code ?? e.name);
        if (!errorSamples.has(status)) errorSamples.set(status, `${e.name}: ${e.message}`.slice(0, SAMPLE_CHARS));
        return status;
      }
    },
    close() {
      client.destroy();
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}
