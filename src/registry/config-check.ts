/**
 * @module registry/config-check
 * At load, the config must agree with the ONNX graph it describes: every
 * tensor named, same datatype, compatible shape. Mismatches are load errors
 * that name the tensor, all reported together, so an author fixes them in one
 * pass instead of discovering them one request at a time.
 */
import { graphTypeText, type GraphTensor } from '../config/auto-complete.js';
import type { ModelConfig, TensorConfig } from '../config/model-config-types.js';
import { ServingError } from '../errors.js';
import { formatShape } from '../protocol/tensor.js';

/**
 * The reshape the session applies to a config tensor: its own `reshape`, or,
 * for a rank-0 graph tensor of a model that does not batch, [] when the
 * config says dims [1] (what auto-complete writes, and what Triton's
 * onnxruntime backend accepts for a scalar): requests send shape [1], the
 * graph gets a 0-dim tensor, answers come back as [1].
 */
export function effectiveReshape(t: TensorConfig, graphTensor: GraphTensor | undefined, maxBatchSize: number): readonly number[] | undefined {
  if (t.reshape !== undefined) return t.reshape;
  if (maxBatchSize === 0 && graphTensor?.shape?.length === 0 && t.dims.length === 1 && t.dims[0] === 1) return [];
  return undefined;
}

/** The shape the model itself sees for a config tensor, batch dim included (-1). */
export function modelShapeOf(t: TensorConfig, maxBatchSize: number, graphTensor?: GraphTensor): number[] {
  const inner = [...(effectiveReshape(t, graphTensor, maxBatchSize) ?? t.dims)];
  return maxBatchSize > 0 ? [-1, ...inner] : inner;
}

function checkTensor(
  kind: 'input' | 'output',
  t: TensorConfig,
  graphTensor: GraphTensor | undefined,
  config: ModelConfig,
  graphNames: readonly string[],
  problems: string[],
): void {
  if (!graphTensor) {
    problems.push(`${kind} '${t.name}' is in config.pbtxt but not in the ONNX model (model ${kind}s: ${graphNames.join(', ') || 'none'})`);
    return;
  }
  if (graphTensor.datatype !== t.dataType) {
    problems.push(`${kind} '${t.name}': config.pbtxt says ${t.dataType} but the ONNX model has ${graphTypeText(graphTensor)}`);
  }
  if (graphTensor.shape === undefined) return; // the graph declares no shape: nothing to compare
  const want = modelShapeOf(t, config.maxBatchSize, graphTensor);
  const have = graphTensor.shape;
  const shown = `config ${formatShape(want)} vs model ${formatShape(have)}`;
  if (want.length !== have.length) {
    const hint = config.maxBatchSize > 0 ? ' (max_batch_size > 0 adds a leading batch dimension)' : '';
    problems.push(`${kind} '${t.name}': rank differs, ${shown}${hint}`);
    return;
  }
  for (let i = 0; i < want.length; i++) {
    const c = want[i]!;
    const g = have[i]!;
    if (g === -1) continue; // the model accepts any size; a config may be stricter
    if (i === 0 && config.maxBatchSize > 0) {
      problems.push(
        `${kind} '${t.name}': max_batch_size is ${config.maxBatchSize} but the model's first dimension is fixed at ${g} (${shown}); set max_batch_size: 0`,
      );
      return;
    }
    if (c !== g) {
      problems.push(`${kind} '${t.name}': dimension ${i} differs, ${shown}`);
      return;
    }
  }
}

/** Control inputs and implicit state (sequence_batching) must be tensors of the graph, with the datatypes the config gives them. */
function checkSequenceTensors(
  config: ModelConfig,
  graph: { readonly inputs: readonly GraphTensor[]; readonly outputs: readonly GraphTensor[] },
  problems: string[],
): void {
  const sequence = config.sequenceBatching;
  if (sequence === undefined) return;
  const inputNames = graph.inputs.map((t) => t.name).join(', ') || 'none';
  const outputNames = graph.outputs.map((t) => t.name).join(', ') || 'none';
  for (const c of sequence.controls) {
    const g = graph.inputs.find((t) => t.name === c.inputName);
    if (!g) problems.push(`sequence_batching control_input '${c.inputName}' (${c.kind}) is not an input of the ONNX model (model inputs: ${inputNames})`);
    else if (g.datatype !== c.dataType)
      problems.push(`sequence_batching control_input '${c.inputName}': the config gives it ${c.dataType} but the ONNX model has ${graphTypeText(g)}`);
  }
  for (const st of sequence.states) {
    const gi = graph.inputs.find((t) => t.name === st.inputName);
    const go = graph.outputs.find((t) => t.name === st.outputName);
    if (!gi) problems.push(`sequence_batching state input '${st.inputName}' is not an input of the ONNX model (model inputs: ${inputNames})`);
    else if (gi.datatype !== st.dataType)
      problems.push(`sequence_batching state '${st.inputName}': config.pbtxt says ${st.dataType} but the ONNX model input has ${graphTypeText(gi)}`);
    if (!go) problems.push(`sequence_batching state output '${st.outputName}' is not an output of the ONNX model (model outputs: ${outputNames})`);
    else if (go.datatype !== st.dataType)
      problems.push(`sequence_batching state '${st.outputName}': config.pbtxt says ${st.dataType} but the ONNX model output has ${graphTypeText(go)}`);
    const want = config.maxBatchSize > 0 ? [-1, ...st.dims] : [...st.dims];
    if (gi?.shape !== undefined && gi.shape.length !== want.length) {
      problems.push(
        `sequence_batching state '${st.inputName}': rank differs, config ${formatShape(want)} vs model ${formatShape(gi.shape)}${config.maxBatchSize > 0 ? ' (max_batch_size > 0 adds a leading batch dimension)' : ''}`,
      );
    }
  }
}

export function checkConfigAgainstGraph(
  config: ModelConfig,
  graph: { readonly inputs: readonly GraphTensor[]; readonly outputs: readonly GraphTensor[] },
  version: number,
): void {
  const problems: string[] = [];
  const inputNames = graph.inputs.map((t) => t.name);
  const outputNames = graph.outputs.map((t) => t.name);
  for (const t of config.input)
    checkTensor(
      'input',
      t,
      graph.inputs.find((g) => g.name === t.name),
      config,
      inputNames,
      problems,
    );
  for (const t of config.output)
    checkTensor(
      'output',
      t,
      graph.outputs.find((g) => g.name === t.name),
      config,
      outputNames,
      problems,
    );
  const configured = new Set(config.input.map((t) => t.name));
  checkSequenceTensors(config, graph, problems);
  for (const c of config.sequenceBatching?.controls ?? []) configured.add(c.inputName);
  for (const st of config.sequenceBatching?.states ?? []) configured.add(st.inputName);
  for (const g of graph.inputs) {
    if (!configured.has(g.name)) problems.push(`ONNX model input '${g.name}' is missing from config.pbtxt`);
  }
  if (problems.length > 0) {
    // The load names the model (errors.ts, withModel).
    throw new ServingError('INVALID_MODEL', `'${config.name}' version ${version}: config.pbtxt does not match the ONNX model: ${problems.join('; ')}`);
  }
}
