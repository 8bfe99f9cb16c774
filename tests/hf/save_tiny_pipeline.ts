// A built-in tiny pipeline written as diffusers' save_pretrained lays out a pipeline folder:
// model_index.json, one folder per component with its config (diffusers' components with their
// _class_name) and safetensors weights, scheduler/scheduler_config.json, the tokenizers' files.
// What the fromPretrained and `dtorch generate --model <folder>` tests load.
import { copyFileSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';

/** `components`: folder name to the module whose weights it holds (text_encoder*, transformer, vae). */
export async function saveTinyPipeline(dir: string, name: 'tiny-flux' | 'tiny-sd3', components: Record<string, hf.nn.Module>): Promise<void> {
  const spec = hf.tinyPipelineSpec(name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'model_index.json'), JSON.stringify(spec.model_index, null, 2));
  for (const [folder, module] of Object.entries(components)) {
    const textEncoder = folder.startsWith('text_encoder');
    const className = (spec.model_index[folder] as [string, string])[1];
    const config = textEncoder ? spec[folder]! : { _class_name: className, ...spec[folder] };
    mkdirSync(join(dir, folder), { recursive: true });
    writeFileSync(join(dir, folder, 'config.json'), JSON.stringify(config, null, 2));
    const state = module.stateDict();
    await hf.nn.saveSafetensors(join(dir, folder, textEncoder ? 'model.safetensors' : 'diffusion_pytorch_model.safetensors'), state);
    dt.dispose([...state.values()]);
  }
  mkdirSync(join(dir, 'scheduler'), { recursive: true });
  writeFileSync(join(dir, 'scheduler', 'scheduler_config.json'), JSON.stringify({ _class_name: 'FlowMatchEulerDiscreteScheduler', ...spec['scheduler'] }, null, 2));
  for (const [folder, tokenizer] of Object.entries(spec.tokenizers)) {
    mkdirSync(join(dir, folder), { recursive: true });
    const from = hf.tinyTokenizerFolder(tokenizer);
    for (const file of readdirSync(from)) if (!file.startsWith('.')) copyFileSync(join(from, file), join(dir, folder, file));
  }
}
