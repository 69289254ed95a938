/**
 * @module bench/lib/s3-server
 * Child-process entry: s3rver (the S3 REST protocol) on 127.0.0.1 with a
 * temporary directory and the buckets named in argv, in its own process so
 * its CPU and memory are not counted against the server under test. Prints
 * `{"port": n, "endpoint": "..."}`; removes its data and exits when stdin ends.
 */
import { startLoopbackS3 } from '../../test/support/s3rver.js';
import { announce, serveCommands } from './child.js';

const buckets = process.argv.slice(2);
const s3 = await startLoopbackS3(buckets.length > 0 ? buckets : ['bench']);
announce({ port: Number(new URL(s3.endpoint).port), endpoint: s3.endpoint });
serveCommands(
  async () => ({}),
  () => s3.close(),
);
