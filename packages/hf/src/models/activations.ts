// Activations by the names configs give them (transformers' ACT2FN), as functions of a tensor.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';

/** An elementwise activation function. */
export type Activation = (x: dt.Tensor) => dt.Tensor;

const activations: Record<string, Activation> = {
  relu: (x) => dt.F.relu(x),
  gelu: (x) => dt.F.gelu(x),
  // transformers writes gelu_new / gelu_fast as the tanh formula op by op; one fused op computes
  // the same function (equal to ~1e-7 in float32; in 16-bit floats it rounds once, not per op)
  gelu_new: (x) => dt.F.gelu(x, { approximate: 'tanh' }),
  gelu_fast: (x) => dt.F.gelu(x, { approximate: 'tanh' }),
  gelu_pytorch_tanh: (x) => dt.F.gelu(x, { approximate: 'tanh' }),
  quick_gelu: (x) => dt.F.quickGelu(x),
  silu: (x) => dt.F.silu(x),
  swish: (x) => dt.F.silu(x),
  tanh: (x) => dt.F.tanh(x),
  sigmoid: (x) => dt.F.sigmoid(x),
};

/** The names configs may give (hidden_act, dense_act_fn). */
export const activationNames: readonly string[] = Object.keys(activations);

/** The activation named `name`; an unknown name is a BAD_CONFIG error naming `where`. */
export function activation(name: string, where: string): Activation {
  const fn = activations[name];
  if (!fn) throw new DTorchError(ErrorCode.BadConfig, `${where}: unknown activation "${name}"; DTorch has ${Object.keys(activations).join(', ')}`);
  return fn;
}
