// CLIP's text encoder (SD3's and Flux's CLIP-L, SD3's CLIP-G): token and position embeddings,
// causal pre-norm transformer layers, a final layer norm, and the pooled output at each row's
// end-of-text token. CLIPTextModelWithProjection adds text_projection (SD3's pooled prompt).
// Keys as transformers' checkpoints on the hub (`text_model.*`); a CLIPTextModel saved by
// transformers 5 without that prefix loads too. Its parallel plan (clip_plans.ts): heads and MLP
// features over 'tp'; inputs given as arrays are split over 'dp' by batch (batchInput).
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode, checkBoolean, checkOptions } from '@dtorch/common';
import { CLIPTextConfig } from './clip_text_config.js';
import { PreTrainedModel, type ModelOptions } from '../../loading/pretrained_model.js';
import { batchInput } from '../../parallel/batch.js';
import { checkHeadsDivide, parallelize } from '../../parallel/parallelize.js';
import { CLIPEncoder } from './clip_encoder.js';
import { clipParallelPlan } from './clip_plans.js';

/** transformers' CLIPTextEmbeddings: token plus position embeddings, checkpoint keys text_model.embeddings.*. */
export class CLIPTextEmbeddings extends nn.Module {
  /** [vocabSize, hiddenSize]. */
  token_embedding: nn.Embedding;
  /** [maxPositionEmbeddings, hiddenSize], one row per position. */
  position_embedding: nn.Embedding;

  constructor(config: CLIPTextConfig, options: ModelOptions) {
    super();
    this.token_embedding = new nn.Embedding(config.vocabSize, config.hiddenSize, options);
    this.position_embedding = new nn.Embedding(config.maxPositionEmbeddings, config.hiddenSize, options);
  }

  /** The embeddings [batch, length, hiddenSize] of `inputIds` [batch, length]. */
  forward(inputIds: dt.Tensor): dt.Tensor {
    const length = inputIds.shape[1]!;
    const positions = dt.arange(length, undefined, 1, { mesh: inputIds.mesh }).unsqueeze(0);
    return this.token_embedding.forward(inputIds).add(this.position_embedding.forward(positions));
  }
}

/** The options of CLIPTextModel.forward and CLIPTextModelWithProjection.forward. */
export interface CLIPTextCallOptions {
  /** [batch, length], 1 where a token is attended (padding 0); default every token. */
  attentionMask?: dt.Tensor | readonly (readonly number[])[];
  /** Also return the embeddings' output and every layer's (before the final layer norm). */
  outputHiddenStates?: boolean;
}

/** What CLIPTextModel.forward returns (transformers' BaseModelOutputWithPooling, camelCase). */
export interface CLIPTextOutput {
  /** [batch, length, hidden], after the final layer norm. */
  lastHiddenState: dt.Tensor;
  /** [batch, hidden], the last hidden state at each row's end-of-text token. */
  poolerOutput: dt.Tensor;
  /** With outputHiddenStates: the embeddings' output, then each layer's (numHiddenLayers + 1 tensors). */
  hiddenStates?: dt.Tensor[];
}

/** The text transformer both public classes hold as `text_model`. */
export class CLIPTextTransformer extends nn.Module {
  /** The config the model was built from. */
  readonly config: CLIPTextConfig;
  /** Token and position embeddings, checkpoint keys text_model.embeddings.*. */
  embeddings: CLIPTextEmbeddings;
  /** The layers, checkpoint keys text_model.encoder.layers.N.*. */
  encoder: CLIPEncoder;
  /** The norm after the last layer (text_model.final_layer_norm.*). */
  final_layer_norm: nn.LayerNorm;

  constructor(config: CLIPTextConfig, options: ModelOptions) {
    super();
    this.config = config;
    this.embeddings = new CLIPTextEmbeddings(config, options);
    this.encoder = new CLIPEncoder(config, options);
    this.final_layer_norm = new nn.LayerNorm(config.hiddenSize, { ...options, eps: config.layerNormEps });
  }

  /** The outputs for `inputIds` [batch, length] (a Tensor or a tokenizer's inputIds); `what` names the caller in errors. */
  forward(what: string, inputIds: dt.Tensor | readonly (readonly number[])[], options: CLIPTextCallOptions | undefined): CLIPTextOutput {
    const o = checkOptions<CLIPTextCallOptions>(`${what} options`, options);
    const mesh = this.embeddings.token_embedding.weight.mesh;
    const ids = batchInput(`${what} inputIds`, inputIds, mesh);
    const [batch, length] = ids.shape as [number, number];
    if (length > this.config.maxPositionEmbeddings) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: ${length} tokens, but the model has ${this.config.maxPositionEmbeddings} positions; truncate the input (the tokenizer's maxLength)`);
    }
    const keepEvery = checkBoolean(`${what} outputHiddenStates`, o.outputHiddenStates ?? false);
    const embedded = this.embeddings.forward(ids);
    const mask = o.attentionMask === undefined ? undefined : attentionMask(batchInput(`${what} attentionMask`, o.attentionMask, mesh), batch, length);
    const layers = this.encoder.forward(embedded, mask, keepEvery);
    const last = this.final_layer_norm.forward(layers.at(-1)!);
    return {
      lastHiddenState: last,
      poolerOutput: this.pool(last, ids),
      ...(keepEvery ? { hiddenStates: [embedded, ...layers] } : {}),
    };
  }

  // Each row's hidden state at its end-of-text token: the first eos_token_id, or (the legacy
  // eos_token_id 2 of older configs) the largest id, as transformers picks it. Selected by a
  // one-hot product, which keeps the batch split over 'dp' as it is.
  private pool(last: dt.Tensor, ids: dt.Tensor): dt.Tensor {
    const eos = this.config.eosTokenId;
    const at = eos === 2 || eos === null ? ids.argmax(-1) : ids.eq(eos).to('int32').argmax(-1);
    const length = ids.shape[1]!;
    const oneHot = dt.arange(length, undefined, 1, { mesh: ids.mesh }).unsqueeze(0).eq(at.unsqueeze(1)); // [batch, length]
    return last.mul(oneHot.unsqueeze(2).to(last.dtype)).sum(1);
  }
}

// The bool mask [batch, 1, length, length]: causal, and no padded key.
function attentionMask(mask: dt.Tensor, batch: number, length: number): dt.Tensor {
  if (mask.shape[0] !== batch || mask.shape[1] !== length) {
    throw new DTorchError(ErrorCode.ShapeMismatch, `CLIP attentionMask must be [${batch}, ${length}] like inputIds, got ${mask.describe()}`);
  }
  const positions = dt.arange(length, undefined, 1, { mesh: mask.mesh });
  const causal = positions.reshape([length, 1]).ge(positions.reshape([1, length])); // query >= key
  return causal.unsqueeze(0).logicalAnd(mask.ne(0).reshape([batch, 1, length])).unsqueeze(1);
}

abstract class CLIPTextModelBase extends PreTrainedModel {
  /** The config the model was built from. */
  readonly config: CLIPTextConfig;
  /** The text transformer, checkpoint keys text_model.*. */
  text_model: CLIPTextTransformer;

  constructor(config: CLIPTextConfig, options: ModelOptions) {
    super();
    this.config = config;
    const o = { mesh: options.mesh ?? dt.defaultMesh(), dtype: options.dtype ?? config.dtype ?? 'float32' };
    checkHeadsDivide(clipParallelPlan, o.mesh, this.constructor.name, 'num_attention_heads', config.numAttentionHeads);
    this.text_model = new CLIPTextTransformer(config, o);
  }

  /** Reads the model's config.json (a CLIPModel's gives its text_config). */
  static readConfig(path: string): CLIPTextConfig {
    return CLIPTextConfig.fromFile(path);
  }

  // transformers 5 saves a CLIPTextModel without the `text_model.` prefix
  static override keyAliases(key: string): readonly string[] {
    return key.startsWith('text_model.') ? [key.slice('text_model.'.length)] : [];
  }

  // a whole CLIPModel's checkpoint also holds the vision tower; older ones the position ids
  static override readonly ignoredCheckpointKeys = [/position_ids$/, /^vision_model\./, /^visual_projection\./, /^logit_scale$/];
}

/**
 * transformers' CLIPTextModel: CLIP's text encoder (Flux's CLIP-L), with its checkpoint keys
 * (text_model.*). A mesh dim 'tp' splits heads and MLP features (clipParallelPlan), 'dp' the batch.
 */
export class CLIPTextModel extends CLIPTextModelBase {
  constructor(config: CLIPTextConfig, options: ModelOptions = {}) {
    super(config, options);
    parallelize(this, this.text_model.embeddings.token_embedding.weight.mesh, clipParallelPlan);
  }

  /** The outputs for `inputIds` [batch, length], a Tensor on the model's mesh or a tokenizer's inputIds. */
  forward(inputIds: dt.Tensor | readonly (readonly number[])[], options?: CLIPTextCallOptions): CLIPTextOutput {
    return this.text_model.forward('CLIPTextModel', inputIds, options);
  }
}

/** What CLIPTextModelWithProjection.forward returns (transformers' CLIPTextModelOutput, camelCase). */
export interface CLIPTextWithProjectionOutput {
  /** [batch, length, hidden], after the final layer norm. */
  lastHiddenState: dt.Tensor;
  /** [batch, projectionDim], the pooled output through text_projection. */
  textEmbeds: dt.Tensor;
  /** With outputHiddenStates: the embeddings' output, then each layer's (numHiddenLayers + 1 tensors). */
  hiddenStates?: dt.Tensor[];
}

/**
 * transformers' CLIPTextModelWithProjection: CLIP's text encoder and text_projection (SD3's CLIP-L
 * and CLIP-G: the projected pooled output is SD3's pooled prompt).
 */
export class CLIPTextModelWithProjection extends CLIPTextModelBase {
  /** hiddenSize to projectionDim, no bias (checkpoint key text_projection.weight). */
  text_projection: nn.Linear;

  constructor(config: CLIPTextConfig, options: ModelOptions = {}) {
    super(config, options);
    const { mesh, dtype } = this.text_model.embeddings.token_embedding.weight;
    this.text_projection = new nn.Linear(config.hiddenSize, config.projectionDim, { mesh, dtype, bias: false });
    parallelize(this, mesh, clipParallelPlan);
  }

  /** No aliases: the checkpoint's keys are taken as they are. */
  static override keyAliases(): readonly string[] {
    return [];
  }

  /** The outputs for `inputIds` [batch, length], a Tensor on the model's mesh or a tokenizer's inputIds. */
  forward(inputIds: dt.Tensor | readonly (readonly number[])[], options?: CLIPTextCallOptions): CLIPTextWithProjectionOutput {
    const { lastHiddenState, poolerOutput, hiddenStates } = this.text_model.forward('CLIPTextModelWithProjection', inputIds, options);
    return { lastHiddenState, textEmbeds: this.text_projection.forward(poolerOutput), ...(hiddenStates ? { hiddenStates } : {}) };
  }
}
