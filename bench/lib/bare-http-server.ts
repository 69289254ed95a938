/**
 * @module bench/lib/bare-http-server
 * Child-process entry: the HTTP limit. A bare node:http server that reads
 * the whole body, JSON.parses it, and answers a fixed small KServe v2 JSON.
 * No framework, no inference. Prints `{"port": n}`; exits when stdin ends.
 */
import http from 'node:http';
import { announce, serveCommands } from './child.js';

const ANSWER = Buffer.from('{"model_name":"model","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,4],"data":[0,0,0,0]}]}');

const server = http.createServer((req, res) => {
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
