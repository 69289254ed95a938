/**
 * @module perf/http-target
 * Where a load run sends its requests, over node:http(s) with one keep-alive
 * agent (a connection per concurrent request, reused, so connection setup is
 * not measured): a KServe v2 endpoint (POST /v2/models/{m}/infer), or
 * SageMaker's container route (POST /invocations with
 * X-Amzn-SageMaker-Target-Model). perf/sdk-target.ts is the third kind, a
 * real SageMaker endpoint through the SDK.
 *
 * A send resolves (never rejects) with a status key: the HTTP status code
 * ("200", "503"), "timeout", or the socket error's code ("ECONNREFUSED"), so
 * the run counts errors by what the target said. The first body of each
 * error status is kept, so the report can say why.
 */
import http from 'node:http';
import https from 'node:https';
import type { RequestPayload } from './request-payloads.js';

export interface PreparedRequest {
  readonly path: string;
  readonly headers: Readonly<Record<string, string | number>>;
  readonly body: Buffer;
}

export interface Target {
  /** For the report: "KServe v2 http://127.0.0.1:8080/v2/models/mlp/infer". */
  readonly description: string;
  prepare(payload: RequestPayload): PreparedRequest;
  send(request: PreparedRequest, timeoutMs: number): Promise<string>;
  /** The first answer body (truncated) seen for each error status. */
  readonly errorSamples: Map<string, string>;
  close(): void;
}

export const TARGET_MODEL_HEADER = 'X-Amzn-SageMaker-Target-Model';
const SAGEMAKER_BINARY = 'application/vnd.sagemaker-triton.binary+json';
const SAMPLE_BYTES = 300;

/** The content-type and length headers a payload needs on the KServe route (binary: Inference-Header-Content-Length). */
function kserveHeaders(payload: RequestPayload): Record<string, string | number> {
  if (payload.kind === 'npy') return { 'content-type': 'application/x-npy' };
  if (payload.jsonHeaderLength === undefined) return { 'content-type': 'application/json' };
  return { 'content-type': 'application/octet-stream', 'inference-header-content-length': payload.jsonHeaderLength };
}

/** On SageMaker's route the JSON header's length travels in the content type (SageMaker drops custom headers). */
export function sagemakerContentType(payload: RequestPayload): string {
  if (payload.kind === 'npy') return 'application/x-npy';
  return payload.jsonHeaderLength === undefined ? 'application/json' : `${SAGEMAKER_BINARY};json-header-size=${payload.jsonHeaderLength}`;
}

export interface HttpTargetOptions {
  readonly baseUrl: string;
  /** KServe: the model in the path. */
  readonly model: string;
  /** Given: POST /invocations with this target-model header instead of the KServe route. */
  readonly targetModel?: string;
}

export function createHttpTarget(options: HttpTargetOptions): Target {
  const base = new URL(options.baseUrl);
  const secure = base.protocol === 'https:';
  const agent = new (secure ? https : http).Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 1024 });
  const prefix = base.pathname.replace(/\/+$/, '');
  const sagemaker = options.targetModel !== undefined;
  const path = sagemaker ? `${prefix}/invocations` : `${prefix}/v2/models/${encodeURIComponent(options.model)}/infer`;
  const errorSamples = new Map<string, string>();
  const request = secure ? https.request : http.request;
  const hostname = base.hostname.replace(/^\[|\]$/g, '');
  const port = base.port === '' ? (secure ? 443 : 80) : Number(base.port);

  return {
    description: sagemaker ? `SageMaker ${base.origin}${path} (${TARGET_MODEL_HEADER}: ${options.targetModel})` : `KServe v2 ${base.origin}${path}`,
    errorSamples,
    prepare(payload) {
      const headers: Record<string, string | number> = sagemaker
        ? { 'content-type': sagemakerContentType(payload), [TARGET_MODEL_HEADER]: options.targetModel! }
        : kserveHeaders(payload);
      headers['content-length'] = payload.body.length;
      return { path, headers, body: payload.body };
    },
    send(prepared, timeoutMs) {
      return new Promise<string>((resolve) => {
        let done = false;
        const finish = (status: string): void => {
          if (done) return;
          done = true;
          resolve(status);
        };
        const onResponse = (res: http.IncomingMessage): void => {
          const status = String(res.statusCode ?? 0);
          const ok = status.startsWith('2');
          let sample: Buffer[] | undefined = !ok && !errorSamples.has(status) ? [] : undefined;
          res.on('data', (chunk: Buffer) => {
            if (sample !== undefined && sample.reduce((n, b) => n + b.length, 0) < SAMPLE_BYTES) sample.push(chunk);
          });
          res.once('end', () => {
            if (sample !== undefined && !errorSamples.has(status))
              errorSamples.set(status, Buffer.concat(sample).toString('utf8').slice(0, SAMPLE_BYTES).trim());
            sample = undefined;
            finish(status);
          });
          res.once('error', (err: NodeJS.ErrnoException) => finish(err.code ?? 'ERESPONSE'));
        };
        let req: http.ClientRequest;
        try {
          req = request({ agent, hostname, port, path: prepared.path, method: 'POST', headers: prepared.headers }, onResponse);
        } catch (err) {
          // node refuses some requests before any socket: a header value it cannot send (a --target-model with a
          // character outside Latin-1, or a control character) throws here. A rejection would go unhandled in the
          // open-loop runner (load-step.ts fires and forgets) and end the run with a stack trace.
          const e = err as NodeJS.ErrnoException;
          const status = e.code ?? 'EREQUEST';
          if (!errorSamples.has(status)) errorSamples.set(status, String(e.message).slice(0, SAMPLE_BYTES));
          finish(status);
          return;
        }
        req.setTimeout(timeoutMs, () => {
          finish('timeout');
          req.destroy();
        });
        req.once('error', (err: NodeJS.ErrnoException) => finish(err.code ?? 'EREQUEST'));
        req.end(prepared.body);
      });
    },
    close() {
      agent.destroy();
    },
  };
}

/**
 * A GET over node:http(s) (not fetch, whose "bad port" list refuses some
 * ports a server may well listen on): the status and body, or why there is
 * none ("ECONNREFUSED", "timeout").
 */
export function httpGet(url: string, timeoutMs = 10_000): Promise<{ status: number; body: string } | { error: string }> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (v: { status: number; body: string } | { error: string }): void => {
      if (!done) {
        done = true;
        resolve(v);
      }
    };
    let req: http.ClientRequest;
    try {
      req = (url.startsWith('https:') ? https : http).get(url, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.once('end', () => finish({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.once('error', (err: NodeJS.ErrnoException) => finish({ error: err.code ?? err.message }));
      });
    } catch (err) {
      finish({ error: (err as Error).message });
      return;
    }
    req.setTimeout(timeoutMs, () => {
      finish({ error: `no answer within ${timeoutMs / 1000} s` });
      req.destroy();
    });
    req.once('error', (err: NodeJS.ErrnoException) => finish({ error: err.code ?? err.message }));
  });
}

/** GET a JSON document (metadata, statistics); undefined when the target does not answer it with 200 JSON. */
export async function getJson(url: string, timeoutMs = 10_000): Promise<unknown> {
  const r = await httpGet(url, timeoutMs);
  if (!('status' in r) || r.status !== 200) return undefined;
  try {
    return JSON.parse(r.body) as unknown;
  } catch {
    return undefined;
  }
}

/** Why GET `url` gave no model metadata: "HTTP 404: ...", "ECONNREFUSED" (for messages). */
export async function whyNoJson(url: string, timeoutMs = 10_000): Promise<string> {
  const r = await httpGet(url, timeoutMs);
  if (!('status' in r)) return r.error;
  const text = r.body.slice(0, 200).trim();
  return r.status === 200 ? 'the answer is not model metadata (KServe v2 {"inputs": [...]})' : `HTTP ${r.status}${text ? `: ${text}` : ''}`;
}

export async function getText(url: string, timeoutMs = 10_000): Promise<string | undefined> {
  const r = await httpGet(url, timeoutMs);
  return 'status' in r && r.status === 200 ? r.body : undefined;
}
