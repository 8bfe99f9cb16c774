import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import * as nn from '@dtorch/nn';
dt.setCaptureStacks(false);
const cfg = { vocab_size: 1000, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 12, num_attention_heads: 4, max_position_embeddings: 77, hidden_act: 'quick_gelu', projection_dim: 32, eos_token_id: 2, bos_token_id: 0, pad_token_id: 1 };
const mesh = new dt.DeviceMesh('cpu', [0]);
const model = nn.skipInit(() => new hf.CLIPTextModel(hf.CLIPTextConfig.fromDict(cfg), { mesh, dtype: 'float32' }));
const ids = dt.tensor([Array.from({ length: 77 }, (_, i) => (i * 7919) % 990 + 1)], { dtype: 'int64', mesh });
const rec = [];
for (let i = 0; i < Number(process.env.N ?? 2000); i++) {
  const t0 = process.hrtime.bigint();
  const out = model.call(ids);
  rec.push(Number(process.hrtime.bigint() - t0) / 1e6);
  await dt.sync();
  dt.dispose(out);
}
rec.sort((a, b) => a - b);
console.log('record ms p10', rec[rec.length / 10 | 0].toFixed(3), 'median', rec[rec.length >> 1].toFixed(3));
