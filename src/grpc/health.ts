/**
 * @module grpc/health
 * grpc.health.v1.Health on the gRPC port: `Check` and `Watch` for the server
 * as a whole (service "") and for inference.GRPCInferenceService. SERVING
 * while the server takes requests, NOT_SERVING from the start of the drain
 * (Kubernetes' gRPC readiness probe then stops sending traffic before the
 * port closes). Any other service name is NOT_FOUND (Check) or
 * SERVICE_UNKNOWN (Watch), as the protocol says.
 */
import { status, type ServerUnaryCall, type ServerWritableStream, type UntypedServiceImplementation, type sendUnaryData } from '@grpc/grpc-js';

export const INFERENCE_SERVICE_NAME = 'inference.GRPCInferenceService';
const KNOWN = new Set(['', INFERENCE_SERVICE_NAME]);

type ServingStatus = 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

interface HealthRequest {
  readonly service: string;
}

export class HealthState {
  private serving = true;
  private readonly watchers = new Set<ServerWritableStream<HealthRequest, { status: ServingStatus }>>();
  /** Watches of unknown services: told nothing more, only ended with the others. */
  private readonly idle = new Set<ServerWritableStream<HealthRequest, { status: ServingStatus }>>();

  get status(): ServingStatus {
    return this.serving ? 'SERVING' : 'NOT_SERVING';
  }

  /** The drain began: every watcher hears NOT_SERVING once. */
  stopServing(): void {
    if (!this.serving) return;
    this.serving = false;
    for (const w of this.watchers) w.write({ status: 'NOT_SERVING' });
  }

  /** Ends the watch streams (at the end of the drain, so the server can close). */
  closeWatchers(): void {
    for (const w of [...this.watchers, ...this.idle]) w.end();
    this.watchers.clear();
    this.idle.clear();
  }

  implementation(): UntypedServiceImplementation {
    return {
      Check: (call: ServerUnaryCall<HealthRequest, unknown>, callback: sendUnaryData<unknown>) => {
        if (!KNOWN.has(call.request.service)) {
          callback({ code: status.NOT_FOUND, details: `unknown service '${call.request.service.slice(0, 200)}' (known: '' and '${INFERENCE_SERVICE_NAME}')` });
          return;
        }
        callback(null, { status: this.status });
      },
      Watch: (call: ServerWritableStream<HealthRequest, { status: ServingStatus }>) => {
        if (!KNOWN.has(call.request.service)) {
          // The stream stays open, as the protocol asks: the service might appear later (here it never does).
          call.write({ status: 'SERVICE_UNKNOWN' });
          this.idle.add(call);
          call.on('cancelled', () => this.idle.delete(call));
          return;
        }
        call.write({ status: this.status });
        this.watchers.add(call);
        call.on('cancelled', () => this.watchers.delete(call));
      },
    };
  }
}
