/**
 * @module test/support/config-problem
 * For tests of server settings one at a time: the smallest environment the
 * server accepts, and the message it refuses a setting with.
 */
import { loadServerConfig } from '../../src/config/server-config.js';

/** A model source and nothing else: every other setting at its default. */
export const minimalEnv: Readonly<Record<string, string>> = { MME_MODEL_SOURCE: '/models' };

/** The message loadServerConfig refuses `env` (over minimalEnv) with; '' when it accepts it. */
export function configProblem(env: Record<string, string>): string {
  try {
    loadServerConfig({ ...minimalEnv, ...env });
  } catch (err) {
    return (err as Error).message;
  }
  return '';
}
