// Flux's prompt encoding, as diffusers' FluxPipeline.encode_prompt: CLIP's pooled output (its
// 77 tokens, padded) and T5's last hidden state at maxSequenceLength tokens (padded), each
// prompt longer than the limit truncated with a warning naming what was cut.
import * as dt from '@dtorch/api';
import { log } from '@dtorch/common';
import type { CLIPTextModel } from '../models/clip/clip_text_model.js';
import type { T5EncoderModel } from '../models/t5/t5_encoder_model.js';
import type { PreTrainedTokenizer } from '../tokenizers/pretrained_tokenizer.js';
import { describePrompt, dpPlacements } from './pipeline_inputs.js';

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
