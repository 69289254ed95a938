/**
 * @module http/invocation-target
 * Which model a SageMaker `/invocations` request addresses. In order:
 * the X-Amzn-SageMaker-Target-Model header (multi-model endpoints); else a
 * `target-model=<target>` attribute in X-Amzn-SageMaker-Custom-Attributes
 * (the SDK's CustomAttributes): SageMaker passes that header through on
 * single-model endpoints of any instance type, so a GPU instance, where
 * SageMaker allows only its own Triton image for multi-model endpoints, can
 * still serve many models from one S3 prefix; else the default model. Both
 * carriers give the same `target` reference, validated the same way
 * (store/target-path.ts) before anything is loaded.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { ServingError } from '../errors.js';
import type { ModelRef } from '../service/inference-service.js';

const TARGET_HEADER = 'x-amzn-sagemaker-target-model';
const CUSTOM_ATTRIBUTES = 'x-amzn-sagemaker-custom-attributes';
const ATTRIBUTE = 'target-model';
const DEFAULT: ModelRef = Object.freeze({ kind: 'default' });

function first(v: string | string[] | undefined): string | undefined {
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s === '' ? undefined : s;
}

/**
 * The `target-model` value of a custom-attributes string (`key=value` items
 * separated by `;` or `,`), or undefined when it has none. Throws
 * INVALID_TARGET for an empty value or two different values.
 */
export function targetFromCustomAttributes(attributes: string): string | undefined {
  let found: string | undefined;
  for (const item of attributes.split(/[;,]/)) {
    const eq = item.indexOf('=');
    if (eq < 0 || item.slice(0, eq).trim().toLowerCase() !== ATTRIBUTE) continue;
    const value = item.slice(eq + 1).trim();
    if (value === '') throw new ServingError('INVALID_TARGET', `X-Amzn-SageMaker-Custom-Attributes: ${ATTRIBUTE} is empty`);
    if (found !== undefined && found !== value) {
      throw new ServingError('INVALID_TARGET', `X-Amzn-SageMaker-Custom-Attributes names two targets ('${found}' and '${value}')`);
    }
    found = value;
  }
  return found;
}

/** The model an `/invocations` (or `/endpoints/{e}/invocations`) request addresses. */
export function invocationRef(headers: IncomingHttpHeaders): ModelRef {
  const target = first(headers[TARGET_HEADER]);
  if (target !== undefined) return { kind: 'target', target };
  const attributes = first(headers[CUSTOM_ATTRIBUTES]);
  // The common case (no attributes, or none naming a target) costs one header read.
  if (attributes === undefined || !attributes.toLowerCase().includes(ATTRIBUTE)) return DEFAULT;
  const fromAttributes = targetFromCustomAttributes(attributes);
  return fromAttributes === undefined ? DEFAULT : { kind: 'target', target: fromAttributes };
}
