/**
 * @module test/support/s3-proxy
 * A small HTTP proxy in front of s3rver that counts the requests the S3
 * server receives (to prove single flight, cache reuse and revalidation) and
 * can fail them: 503 answers, a response cut (or stalled) mid-body, or a
 * body trickled a few bytes at a time (progress that never ends).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startLoopbackS3, useS3rverCredentials, type LoopbackS3 } from './s3rver.js';

interface SeenRequest {
  readonly method: string;
  readonly url: string;
}

export class S3Proxy {
  readonly requests: SeenRequest[] = [];
  /** The next N object GETs forward the headers and `cutAfterBytes` of the body, then drop the connection. */
  cutNextGets = 0;
  cutAfterBytes = 200 * 1024;
  /** With a cut: keep the connection open, silent, instead of dropping it. */
  stallInsteadOfCut = false;
  /** The next N requests (any kind) get 503 SlowDown. */
  failNext = 0;
  /** Requests for keys starting with this (after the bucket) get 403 AccessDenied, as a bucket policy denying them would. */
  denyKeysStartingWith: string | undefined;
  /** The next N object GETs send their body `trickleBytes` every `trickleEveryMs` (4 B/s by default). */
  trickleNextGets = 0;
  trickleBytes = 4;
  trickleEveryMs = 1000;
  private server: http.Server | undefined;
  private readonly stalled = new Set<http.ServerResponse>();
  private readonly trickles = new Set<NodeJS.Timeout>();

  constructor(
    private readonly upstreamPort: number,
    private readonly bucket: string,
  ) {}

  get url(): string {
    const address = this.server?.address() as AddressInfo;
    return `http://127.0.0.1:${address.port}`;
  }

  /** Object GETs (not listings) the server received, optionally for one key. */
  gets(key?: string): number {
    return this.requests.filter((r) => r.method === 'GET' && isObjectRequest(this.bucket, r.url, key)).length;
  }

  heads(key?: string): number {
    return this.requests.filter((r) => r.method === 'HEAD' && isObjectRequest(this.bucket, r.url, key)).length;
  }

  listings(): number {
    return this.requests.filter((r) => r.method === 'GET' && r.url.includes('list-type=2')).length;
  }

  async start(): Promise<void> {
    const server = http.createServer((req, res) => this.handle(req, res));
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  }

  /** Responses now held silent mid-body. */
  get stalledCount(): number {
    return this.stalled.size;
  }

  /** Drops the connections of stalled responses (the client sees a cut and may retry). */
  releaseStalls(): void {
    for (const res of this.stalled) res.socket?.destroy();
    this.stalled.clear();
  }

  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    for (const t of this.trickles) clearInterval(t);
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    this.requests.push({ method, url });
    if (this.failNext > 0) {
      this.failNext -= 1;
      req.resume();
      res.writeHead(503, { 'content-type': 'application/xml' });
      res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>');
      return;
    }
    if (this.denyKeysStartingWith !== undefined && pathOf(url).startsWith(`/${this.bucket}/${this.denyKeysStartingWith}`)) {
      req.resume();
      res.writeHead(403, { 'content-type': 'application/xml' });
      res.end(method === 'HEAD' ? undefined : '<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>');
      return;
    }
    const cut = method === 'GET' && isObjectRequest(this.bucket, url) && this.cutNextGets > 0;
    if (cut) this.cutNextGets -= 1;
    const trickle = !cut && method === 'GET' && isObjectRequest(this.bucket, url) && this.trickleNextGets > 0;
    if (trickle) this.trickleNextGets -= 1;
    const upstream = http.request({ host: '127.0.0.1', port: this.upstreamPort, method, path: url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      if (trickle) {
        this.trickle(answer, res);
        return;
      }
      if (!cut) {
        answer.pipe(res);
        return;
      }
      let sent = 0;
      answer.on('data', (chunk: Buffer) => {
        if (sent >= this.cutAfterBytes) return;
        const part = chunk.subarray(0, this.cutAfterBytes - sent);
        sent += part.length;
        if (sent >= this.cutAfterBytes) {
          const stall = this.stallInsteadOfCut;
          res.on('close', () => {
            answer.destroy();
            this.stalled.delete(res);
          });
          if (stall) this.stalled.add(res);
          res.write(part, () => {
            if (!stall) res.socket?.destroy();
          });
        } else {
          res.write(part);
        }
      });
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  }

  /** Buffers the upstream body and sends it a few bytes per tick until done or the client goes. */
  private trickle(answer: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    answer.on('data', (c: Buffer) => chunks.push(c));
    answer.on('end', () => {
      const body = Buffer.concat(chunks);
      let sent = 0;
      const timer = setInterval(() => {
        if (res.destroyed) return clearInterval(timer);
        res.write(body.subarray(sent, sent + this.trickleBytes));
        sent += this.trickleBytes;
        if (sent >= body.length) {
          clearInterval(timer);
          res.end();
        }
      }, this.trickleEveryMs);
      this.trickles.add(timer);
      res.on('close', () => {
        clearInterval(timer);
        this.trickles.delete(timer);
      });
    });
  }
}

function isObjectRequest(bucket: string, url: string, key?: string): boolean {
  const pathname = url.split('?')[0] ?? '';
  if (url.includes('list-type=')) return false;
  if (key === undefined) return pathname.startsWith(`/${bucket}/`) && pathname.length > bucket.length + 2;
  return pathname === `/${bucket}/${key.split('/').map(encodeURIComponent).join('/')}`;
}

function pathOf(url: string): string {
  const q = url.indexOf('?');
  return decodeURIComponent(q < 0 ? url : url.slice(0, q));
}

/**
 * s3rver holding `bucket`, an S3Proxy in front of it, and s3rver's
 * credentials in this process's environment (the in-process servers' S3
 * client reads them); `ctx` (temp-dir.ts Cleanups) puts the credentials back
 * and stops both.
 */
export async function startProxiedBucket(
  ctx: { after(fn: () => Promise<void> | void): void },
  bucket: string,
): Promise<{ readonly s3: LoopbackS3; readonly proxy: S3Proxy }> {
  const s3 = await startLoopbackS3([bucket]);
  ctx.after(() => s3.close());
  const proxy = new S3Proxy(Number(new URL(s3.endpoint).port), bucket);
  await proxy.start();
  ctx.after(() => proxy.close());
  ctx.after(useS3rverCredentials());
  return { s3, proxy };
}
