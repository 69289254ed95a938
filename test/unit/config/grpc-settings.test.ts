/**
 * @module test/unit/config/grpc-settings
 * MME_GRPC_PORT and the gRPC TLS files: off by default, each bad value
 * refused with a message naming the variable.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadServerConfig } from '../../../src/config/server-config.js';
import { minimalEnv as base, configProblem as problem } from '../../support/config-problem.js';

describe('gRPC settings', () => {
  test('off by default; a port; 0 = any free port', () => {
    const c = loadServerConfig(base);
    assert.equal(c.grpcPort, undefined);
    assert.equal(c.grpcTlsCertFile, undefined);
    assert.equal(loadServerConfig({ ...base, MME_GRPC_PORT: '8001' }).grpcPort, 8001);
    assert.equal(loadServerConfig({ ...base, MME_GRPC_PORT: '0' }).grpcPort, 0);
  });

  test('refused: not a port, the HTTP port, the metrics port, outside SAGEMAKER_SAFE_PORT_RANGE', () => {
    assert.match(problem({ MME_GRPC_PORT: 'x' }), /MME_GRPC_PORT must be an integer/);
    assert.match(problem({ MME_GRPC_PORT: '8080' }), /MME_GRPC_PORT 8080 is the main/);
    assert.match(problem({ MME_GRPC_PORT: '9000', MME_METRICS_PORT: '9000' }), /also MME_METRICS_PORT/);
    assert.match(problem({ MME_GRPC_PORT: '8001', SAGEMAKER_SAFE_PORT_RANGE: '9000-9100' }), /outside SAGEMAKER_SAFE_PORT_RANGE/);
    assert.equal(loadServerConfig({ ...base, MME_GRPC_PORT: '9001', SAGEMAKER_SAFE_PORT_RANGE: '9000-9100' }).grpcPort, 9001);
  });

  test('TLS: certificate and key together (paths resolved), CA only with them', () => {
    const c = loadServerConfig({ ...base, MME_GRPC_TLS_CERT: 'tls/cert.pem', MME_GRPC_TLS_KEY: 'tls/key.pem', MME_GRPC_TLS_CA: 'tls/ca.pem' });
    assert.equal(c.grpcTlsCertFile, path.resolve('tls/cert.pem'));
    assert.equal(c.grpcTlsKeyFile, path.resolve('tls/key.pem'));
    assert.equal(c.grpcTlsCaFile, path.resolve('tls/ca.pem'));
    assert.match(problem({ MME_GRPC_TLS_CERT: 'cert.pem' }), /MME_GRPC_TLS_CERT is set without MME_GRPC_TLS_KEY/);
    assert.match(problem({ MME_GRPC_TLS_KEY: 'key.pem' }), /MME_GRPC_TLS_KEY is set without MME_GRPC_TLS_CERT/);
    assert.match(problem({ MME_GRPC_TLS_CA: 'ca.pem' }), /MME_GRPC_TLS_CA needs/);
  });
});

describe('MME_MODEL_MESH', () => {
  test('off by default; on only with MME_GRPC_PORT', () => {
    assert.equal(loadServerConfig(base).modelMesh, false);
    assert.equal(loadServerConfig({ ...base, MME_GRPC_PORT: '8001', MME_MODEL_MESH: 'true', MME_MODEL_URL_ROOTS: '/models' }).modelMesh, true);
    assert.match(problem({ MME_MODEL_MESH: 'true' }), /MME_MODEL_MESH=true needs MME_GRPC_PORT/);
    assert.match(problem({ MME_GRPC_PORT: '8001', MME_MODEL_MESH: 'maybe' }), /MME_MODEL_MESH must be true or false/);
  });
});
