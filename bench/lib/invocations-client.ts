/**
 * @module bench/lib/invocations-client
 * A keep-alive HTTP client for a bench that drives /invocations itself:
 * POST a JSON body with the target header, parse the JSON answer; anything
 * but 200 rejects with the target, status and the start of the answer.
 */
import http from 'node:http';

/** A v2 JSON answer as the benches read it. */
export interface V2Answer {
  readonly outputs: { readonly name: string; readonly data: number[] }[];
}

export interface InvocationsClient {
  post(target: string, body: string): Promise<V2Answer>;
  /** Close the kept-alive connections. */
  close(): void;
}

/** A client of the server on 127.0.0.1:`port`, with at most `sockets` connections. */
export function invocationsClient(port: number, sockets: number): InvocationsClient {
  const agent = new http.Agent({ keepAlive: true, maxSockets: sockets });
  return {
    post: (target, body) =>
      new Promise((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port,
            path: '/invocations',
            method: 'POST',
            agent,
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-amzn-sagemaker-target-model': target },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => {
              const text = Buffer.concat(chunks).toString('utf8');
              if (res.statusCode !== 200) reject(new Error(`${target}: HTTP ${res.statusCode}: ${text.slice(0, 300)}`));
              else resolve(JSON.parse(text) as V2Answer);
            });
            res.on('error', reject);
          },
        );
        req.on('error', reject);
        req.end(body);
      }),
    close: () => agent.destroy(),
  };
}
