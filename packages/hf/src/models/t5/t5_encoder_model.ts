// T5EncoderModel: the encoder stack of T5 (the text encoder of SD3 and Flux): token embedding
// (`shared`, tied to `encoder.embed_tokens`), blocks whose first computes the relative position
// bias that all share, a final RMS norm. Keys and structure as transformers' modeling_t5.py.
// Its parallel plan (t5_plans.ts): heads and feed-forward features over 'tp'; inputs given as
// arrays are split over 'dp' by batch (batchInput).
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { checkOptions } from '@dtorch/common';
import { T5Config } from './t5_config.js';
import { PreTrainedModel, type ModelOptions } from '../../loading/pretrained_model.js';
import { batchInput } from '../../parallel/batch.js';
import { checkHeadsDivide, parallelize } from '../../parallel/parallelize.js';
import { T5Block } from './t5_block.js';
import { T5LayerNorm } from './t5_layer_norm.js';
import { t5ParallelPlan } from './t5_plans.js';

/** transformers' T5Stack (the encoder): embedding, blocks, final norm; checkpoint keys encoder.* under T5EncoderModel. */
export class T5Stack extends nn.Module {
  /** The token embedding [vocabSize, dModel], the model's `shared` itself (tied). */
  embed_tokens: nn.Embedding;
  /** transformers' `block`: numLayers T5Blocks, checkpoint keys encoder.block.N.*; block 0 holds the relative attention bias. */
  block: nn.ModuleList<T5Block>;
  /** The RMS norm after the last block (checkpoint key encoder.final_layer_norm.weight). */
  final_layer_norm: T5LayerNorm;

  constructor(config: T5Config, embedTokens: nn.Embedding, options: ModelOptions) {
    super();
    this.embed_tokens = embedTokens;
    this.block = new nn.ModuleList(Array.from({ length: config.numLayers }, (_, i) => new T5Block(config, i === 0, options)));
    this.final_layer_norm = new T5LayerNorm(config.dModel, config.layerNormEpsilon, options);
  }

  /** The last hidden state [batch, length, dModel] of `inputIds` [batch, length]; `attentionMask` [batch, length] is 1 where a token is attended. */
  forward(inputIds: dt.Tensor, attentionMask: dt.Tensor | undefined): dt.Tensor {
    let hidden = this.embed_tokens.forward(inputIds);
    const positionBias = this.block.at(0).selfAttention.SelfAttention.positionBias(inputIds.shape[1]!, attentionMask);
    for (const block of this.block) {
      const previous = hidden;
      hidden = block.call(previous, positionBias); // each block's intermediates freed at its end
      previous.dispose();
    }
    return this.final_layer_norm.forward(hidden);
  }
}

/** What T5EncoderModel.forward returns (transformers' BaseModelOutput, camelCase). */
export interface T5EncoderOutput {
  /** [batch, length, dModel], the output of the final norm. */
  lastHiddenState: dt.Tensor;
}

/**
 * transformers' T5EncoderModel: T5's encoder alone (the text encoder of SD3 and Flux), with its
 * checkpoint keys. Load with `T5EncoderModel.fromPretrained(source, { mesh, dtype })`; a mesh dim
 * 'tp' splits heads and feed-forward features (t5ParallelPlan), 'dp' the batch.
 */
export class T5EncoderModel extends PreTrainedModel {
  /** The config the model was built from. */
  readonly config: T5Config;
  /** The token embedding [vocabSize, dModel] (checkpoint key shared.weight, or encoder.embed_tokens.weight). */
  shared: nn.Embedding;
  /** The encoder stack, checkpoint keys encoder.*. */
  encoder: T5Stack;

  constructor(config: T5Config, options: ModelOptions = {}) {
    super();
    this.config = config;
    const o = { mesh: options.mesh ?? dt.defaultMesh(), dtype: options.dtype ?? config.dtype ?? 'float32' };
    checkHeadsDivide(t5ParallelPlan, o.mesh, 'T5EncoderModel', 'num_heads', config.numHeads);
    this.shared = new nn.Embedding(config.vocabSize, config.dModel, o);
    this.encoder = new T5Stack(config, this.shared, o);
    parallelize(this, o.mesh, t5ParallelPlan);
  }

  /** Reads the model's config.json. */
  static readConfig(path: string): T5Config {
    return T5Config.fromFile(path);
  }

  // the tied embedding may be saved under either name
  static override keyAliases(key: string): readonly string[] {
    return key === 'shared.weight' ? ['encoder.embed_tokens.weight'] : [];
  }

  static override readonly ignoredCheckpointKeys = [/^decoder\./, /^lm_head\./, /^encoder\.embed_tokens\.weight$/];

  /**
   * The encoder's last hidden state [batch, length, dModel] for `inputIds` [batch, length]
   * (a Tensor on the model's mesh, or a tokenizer's inputIds); `attentionMask` [batch, length]
   * is 1 where a token is attended.
   */
  forward(inputIds: dt.Tensor | readonly (readonly number[])[], options?: { attentionMask?: dt.Tensor | readonly (readonly number[])[] }): T5EncoderOutput {
    const o = checkOptions<{ attentionMask: dt.Tensor | number[][] }>('T5EncoderModel options', options);
    const mesh = this.shared.weight.mesh;
    const ids = batchInput('T5EncoderModel inputIds', inputIds, mesh);
    const mask = o.attentionMask === undefined ? undefined : batchInput('T5EncoderModel attentionMask', o.attentionMask, mesh);
    return { lastHiddenState: this.encoder.forward(ids, mask) };
  }
}
