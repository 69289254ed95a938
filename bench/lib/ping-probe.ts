/**
 * @module bench/lib/ping-probe
 * Another tenant's view of a server: `/ping` on one keep-alive connection,
 * sent again the moment each answer arrives, timed to the end of each answer.
 * While the server does something else (cold loads, a flood), its latencies
 * show how long that work holds the event loop in one piece.
 */
import http from 'node:http';

export interface PingProbe {
  /** Stops after the ping in flight; the latencies (ms) of every answered ping. */
  stop(): Promise<number[]>;
}

export function startPingProbe(url: string): PingProbe {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  let running = true;
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const started = performance.now();
      http
        .get(`${url}/ping`, { agent }, (res) => {
          res.resume();
          res.on('end', () => {
            latencies.push(performance.now() - started);
            resolve();
          });
        })
        .on('error', reject);
    });
  const loop = (async (): Promise<void> => {
    while (running) await one();
  })();
  return {
    async stop() {
      running = false;
      await loop;
      agent.destroy();
      return latencies;
    },
  };
}
