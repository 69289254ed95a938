/**
 * @module http/metrics-listener
 * The optional second listener (MME_METRICS_PORT) for Prometheus scrapers
 * that must not share the inference port: plain node:http, GET /metrics only,
 * the same per-instance registry (the main port then does not serve it),
 * behind the same access check (`metrics` in MME_HTTP_RESTRICTED_API).
 */
import http from 'node:http';
import { ServingError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { AccessPolicy } from '../service/access-policy.js';
import { httpRefusal } from './access-guard.js';
import { errorReply } from './error-response.js';
import { allow } from './request-envelope.js';
import { ROUTES } from './route-table.js';

function sendError(res: http.ServerResponse, err: ServingError): void {
  const reply = errorReply(err);
  res.writeHead(reply.status, { 'Content-Type': 'application/json; charset=utf-8', ...allow(err) }).end(reply.body);
}

export function createMetricsListener(metrics: Metrics, logger: Logger, access: AccessPolicy): http.Server {
  return http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') {
      sendError(res, new ServingError('ROUTE_NOT_FOUND', `only GET /metrics is served on the metrics port, not ${path?.slice(0, 200)}`));
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      sendError(res, new ServingError('METHOD_NOT_ALLOWED', `method ${req.method} is not allowed on /metrics`, { details: { allow: ['GET', 'HEAD'] } }));
      return;
    }
    const refused = httpRefusal(access, ROUTES.metrics, req, res);
    if (refused !== undefined) {
      logger.warn({ path, code: refused.code, err: refused.message }, 'request rejected');
      sendError(res, refused);
      return;
    }
    metrics.registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'Content-Type': metrics.registry.contentType });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (err: unknown) => {
        logger.error({ err: (err as Error).message }, 'metrics collection failed');
        sendError(res, new ServingError('INTERNAL', `metrics collection failed: ${(err as Error).message}`));
      },
    );
  });
}
