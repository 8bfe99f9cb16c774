// Flux's prompt encoding, as diffusers' FluxPipeline.encode_prompt: CLIP's pooled output (its
// 77 tokens, padded) and T5's last hidden state at maxSequenceLength tokens (padded), each
// prompt longer than the limit truncated with a warning naming what was cut; or the caller's
// embeddings, checked. Either way on the pipeline's mesh (the batch split over 'dp') in the
// transformer's dtype, each prompt's rows repeated numImagesPerPrompt times.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkInteger, checkKnownOptions, log } from '@dtorch/common';
import type { CLIPTextModel } from '../../models/clip/clip_text_model.js';
import type { T5EncoderModel } from '../../models/t5/t5_encoder_model.js';
import type { PreTrainedTokenizer } from '../../tokenizers/pretrained_tokenizer.js';
import { describePrompt, dpPlacements, imagesPerPrompt, promptList, promptsFor, repeatPerPrompt, tensorOption } from '../pipeline_inputs.js';
import type { FluxPipeline } from './flux_pipeline.js';
import { textIds } from './flux_latents.js';

/** diffusers' encode_prompt arguments, camelCase. */
export interface FluxEncodePromptOptions {
  /** CLIP's prompt, or a list of prompts; T5's too unless prompt2 is given. */
  prompt?: string | readonly string[];
  /** T5's prompt (default `prompt`). */
  prompt2?: string | readonly string[];
  /** Rows per prompt in the result (default 1). */
  numImagesPerPrompt?: number;
  /** Already encoded (then no text encoder runs): T5's hidden states [batch, length, joint_attention_dim]. */
  promptEmbeds?: dt.Tensor;
  /** CLIP's pooled output [batch, pooled_projection_dim], with promptEmbeds. */
  pooledPromptEmbeds?: dt.Tensor;
  /** T5's tokens (default 512, at most 512). */
  maxSequenceLength?: number;
}

/** What encodePrompt returns, on the pipeline's mesh (batch split over 'dp') in the transformer's dtype; the caller owns them. */
export interface FluxPromptEmbeds {
  /** [batch · numImagesPerPrompt, maxSequenceLength, joint_attention_dim]. */
  promptEmbeds: dt.Tensor;
  /** [batch · numImagesPerPrompt, pooled_projection_dim]. */
  pooledPromptEmbeds: dt.Tensor;
  /** [maxSequenceLength, 3] zeros: the text tokens' position ids. */
  textIds: dt.Tensor;
}

const ENCODE_OPTIONS = ['prompt', 'prompt2', 'numImagesPerPrompt', 'promptEmbeds', 'pooledPromptEmbeds', 'maxSequenceLength'] as const;
const MAX_SEQUENCE_LENGTH = 512;

/** FluxPipeline.encodePrompt (see FluxEncodePromptOptions); `what` names the call. */
export async function encodeFluxPrompt(pipe: FluxPipeline, what: string, options: FluxEncodePromptOptions): Promise<FluxPromptEmbeds> {
  const o = checkKnownOptions<FluxEncodePromptOptions>(`${what} options`, options, ENCODE_OPTIONS);
  const n = imagesPerPrompt(what, o.numImagesPerPrompt);
  const maxSequenceLength = checkMaxSequenceLength(what, o.maxSequenceLength);
  const prompt = promptList(what, 'prompt', o.prompt);
  const prompt2 = promptList(what, 'prompt2', o.prompt2);
  let pooled: dt.Tensor;
  let embeds: dt.Tensor;
  let owned: boolean;
  if (o.promptEmbeds !== undefined) {
    if (prompt || prompt2) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give prompt (and prompt2) or promptEmbeds, not both`);
    if (o.pooledPromptEmbeds === undefined) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: promptEmbeds needs pooledPromptEmbeds too (CLIP's pooled output of the same prompts)`);
    }
    embeds = checkEmbeds(pipe, what, 'promptEmbeds', o.promptEmbeds, 3);
    pooled = checkEmbeds(pipe, what, 'pooledPromptEmbeds', o.pooledPromptEmbeds, 2);
    if (pooled.shape[0] !== embeds.shape[0]) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: pooledPromptEmbeds has ${pooled.shape[0]} rows but promptEmbeds ${embeds.shape[0]}`);
    }
    owned = false;
  } else {
    if (!prompt) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give prompt, or promptEmbeds and pooledPromptEmbeds`);
    const { textEncoder, tokenizer, textEncoder2, tokenizer2 } = pipe;
    if (!textEncoder || !textEncoder2 || !tokenizer || !tokenizer2) {
      throw new DTorchError(
        ErrorCode.InvalidArgument,
        `${what}: this pipeline has no text encoders (released, or built without them): pass promptEmbeds and pooledPromptEmbeds (from encodePrompt before releaseTextEncoders())`,
      );
    }
    const prompts2 = promptsFor(what, 'prompt2', prompt2 ?? prompt, prompt.length);
    pooled = await clipPooledEmbeds(what, textEncoder, tokenizer, prompt, tokenizer.modelMaxLength > 1e6 ? 77 : tokenizer.modelMaxLength);
    try {
      embeds = await t5PromptEmbeds(what, textEncoder2, tokenizer2, prompts2, maxSequenceLength);
    } catch (err) {
      pooled.dispose();
      throw err;
    }
    owned = true;
  }
  const place = (t: dt.Tensor) => {
    const placed = dt.tidy(() => {
      const whole = t.redistribute(pipe.mesh, pipe.mesh.shape.map(() => dt.Replicate()));
      const cast = whole.dtype === pipe.dtype ? whole : whole.to(pipe.dtype);
      return repeatPerPrompt(cast, n).redistribute(dpPlacements(pipe.mesh, t.shape[0]! * n));
    });
    if (owned) t.dispose();
    return placed === t ? dt.tidy(() => t.clone()) : placed; // always the caller's own tensor
  };
  const promptEmbeds = place(embeds);
  const pooledPromptEmbeds = place(pooled);
  return { promptEmbeds, pooledPromptEmbeds, textIds: textIds(promptEmbeds.shape[1]!, pipe.mesh, pipe.dtype) };
}

/** maxSequenceLength: default 512, at most 512 (as diffusers). */
export function checkMaxSequenceLength(what: string, value: unknown): number {
  if (value === undefined) return MAX_SEQUENCE_LENGTH;
  if (typeof value === 'number' && Number.isInteger(value) && value > MAX_SEQUENCE_LENGTH) {
    throw new DTorchError(ErrorCode.InvalidArgument, `${what}: maxSequenceLength cannot be greater than ${MAX_SEQUENCE_LENGTH} but is ${value} (as in diffusers)`);
  }
  return checkInteger(`${what} maxSequenceLength`, value, 1, MAX_SEQUENCE_LENGTH);
}

// a given embedding: a tensor of `ndim` dims ending in the transformer's width for it
function checkEmbeds(pipe: FluxPipeline, what: string, name: string, value: unknown, ndim: number): dt.Tensor {
  const t = tensorOption(what, name, value, ndim);
  const c = pipe.transformer.config;
  const width = ndim === 3 ? c.jointAttentionDim : c.pooledProjectionDim;
  if (t.shape[ndim - 1] !== width) {
    const key = ndim === 3 ? 'joint_attention_dim' : 'pooled_projection_dim';
    throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: ${name} must end in the transformer's ${key} (${width}), got ${t.describe()}`);
  }
  return t;
}

/**
 * Token ids [prompts, maxLength] (padded to maxLength, truncated to it): as diffusers'
 * tokenizer(prompt, padding="max_length", max_length, truncation=True), with a warning for each
 * prompt that was cut (`limit` names the limit in it).
 */
export async function tokenizePadded(what: string, tokenizer: PreTrainedTokenizer, prompts: string[], maxLength: number, limit: string): Promise<number[][]> {
  const { inputIds } = await tokenizer.encode(prompts, { padding: 'max_length', maxLength, truncation: true });
  const whole = await tokenizer.encode(prompts);
  for (const [i, row] of whole.inputIds.entries()) {
    if (row.length <= maxLength) continue;
    // the kept part ends with the end-of-sequence token in place of token maxLength - 1
    const removed = await tokenizer.decode(row.slice(maxLength - 1, -1), { skipSpecialTokens: true });
    log.warn(`${what}: prompt ${describePrompt(prompts[i]!)} has ${row.length} tokens, more than ${limit} (${maxLength}); truncated, removing ${JSON.stringify(removed)}`);
  }
  return inputIds;
}

/** CLIP's pooled output [prompts, hidden] (diffusers' _get_clip_prompt_embeds), on the encoder's mesh. */
export async function clipPooledEmbeds(what: string, encoder: CLIPTextModel, tokenizer: PreTrainedTokenizer, prompts: string[], maxLength: number): Promise<dt.Tensor> {
  const ids = await tokenizePadded(what, tokenizer, prompts, maxLength, "CLIP's limit");
  return dt.tidy(() => encoder.forward(idsTensor(ids, encoder.text_model.embeddings.token_embedding.weight.mesh)).poolerOutput);
}

/** T5's last hidden state [prompts, maxSequenceLength, dModel] (diffusers' _get_t5_prompt_embeds), on the encoder's mesh. */
export async function t5PromptEmbeds(what: string, encoder: T5EncoderModel, tokenizer: PreTrainedTokenizer, prompts: string[], maxSequenceLength: number): Promise<dt.Tensor> {
  const ids = await tokenizePadded(what, tokenizer, prompts, maxSequenceLength, 'maxSequenceLength');
  return dt.tidy(() => encoder.forward(idsTensor(ids, encoder.shared.weight.mesh)).lastHiddenState);
}

// the ids as int64 on the encoder's mesh, the prompts split over 'dp' where they divide evenly
function idsTensor(ids: number[][], mesh: dt.DeviceMesh): dt.Tensor {
  return dt.tensor(ids, { dtype: 'int64', mesh, placements: dpPlacements(mesh, ids.length) });
}
