/**
 * @module bench/lib/bare-http-server
 * Child-process entry: the HTTP limit. A bare node:http server that reads
 * the whole body, JSON.parses it, and answers a fixed small KServe v2 JSON.
 * No framework, no inference. With the argument `refuse`, the limit of a
 * refusal instead: every request answered at once with a fixed 429, Retry-After
 * and an error body of the size onnx-mme's has, its body left unread (node
 * discards it), as onnx-mme refuses before reading a body. Prints
 * `{"port": n}`; exits when stdin ends.
 */
import http from 'node:http';
import { announce, serveCommands } from './child.js';

const ANSWER = Buffer.from('{"model_name":"model","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,4],"data":[0,0,0,0]}]}');

const REFUSAL = Buffer.from(
  JSON.stringify({
    error: 'server is at its limit of 1 requests in progress (MME_MAX_INFLIGHT_REQUESTS); retry later',
    code: 'OVERLOADED',
    details: { reason: 'inflight_requests', retryAfterSeconds: 1 },
  }),
);

const refuse = process.argv[2] === 'refuse';

const server = http.createServer((req, res) => {
  if (refuse) {
    res.writeHead(429, { 'content-type': 'application/json', 'content-length': REFUSAL.length, 'retry-after': '1' });
    res.end(REFUSAL);
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    try {
      JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      res.writeHead(400).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': ANSWER.length });
    res.end(ANSWER);
  });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  announce({ port: typeof address === 'object' && address ? address.port : 0 });
});
serveCommands(
  async () => ({}),
  async () => {
    server.closeAllConnections();
  },
);
