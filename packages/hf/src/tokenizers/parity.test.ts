// Parity with Python: every fixture folder (tools/reference/make_tokenizer_fixtures.py) loaded by
// AutoTokenizer gives transformers' ids, attention masks, decoded texts and attributes for the
// same 240 strings, and the slow folders convert to the tokenizer transformers builds.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AutoTokenizer, type EncodeOptions, type PreTrainedTokenizer } from './index.js';

const FIXTURES = new URL('../../../../tests/fixtures/hf/tokenizers/', import.meta.url);

interface FolderExpectation {
  attributes: { modelMaxLength: number | null; padToken: string | null; padTokenId: number | null; eosTokenId: number | null; bosTokenId: number | null; vocabSize: number; length: number };
  encode: { options: EncodeOptions; batch?: number; inputIds: number; attentionMask: number }[];
  decode: { case: number; skipSpecialTokens: boolean; texts: number }[];
}
interface Expected {
  strings: string[];
  folders: Record<string, FolderExpectation>;
  values: unknown[];
}

const readFixture = (name: string) => readFileSync(new URL(name, FIXTURES));
const readJsonGz = <T>(name: string): T => JSON.parse(gunzipSync(readFixture(name)).toString('utf8')) as T;
const folders = JSON.parse(readFixture('folders.json').toString('utf8')) as Record<string, Record<string, string>>;
const expected = readJsonGz<Expected>('expected.json.gz');

let root: string;
const tokenizers = new Map<string, PreTrainedTokenizer>();

/** The folder as the fixture script gave it to Python: its files copied, the .gz ones gunzipped. */
function materialize(folder: string): string {
  const dir = join(root, folder);
  mkdirSync(dir);
  for (const [name, path] of Object.entries(folders[folder]!)) {
    const data = readFixture(path);
    writeFileSync(join(dir, name), path.endsWith('.gz') ? gunzipSync(data) : data);
  }
  return dir;
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'dtorch-tokenizers-'));
  for (const folder of Object.keys(folders)) tokenizers.set(folder, await AutoTokenizer.fromPretrained(materialize(folder)));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

test('the fixtures cover 200+ strings in every folder', () => {
  expect(expected.strings.length).toBeGreaterThanOrEqual(200);
  expect(Object.keys(expected.folders).sort()).toEqual(Object.keys(folders).sort());
});

describe.each(Object.keys(folders))('%s', (folder) => {
  const want = expected.folders[folder]!;
  const tok = () => tokenizers.get(folder)!;

  test('attributes as transformers has them', () => {
    const a = want.attributes;
    expect({
      modelMaxLength: tok().modelMaxLength > 1e20 ? null : tok().modelMaxLength,
      padToken: tok().padToken ?? null,
      padTokenId: tok().padTokenId ?? null,
      eosTokenId: tok().eosTokenId ?? null,
      bosTokenId: tok().bosTokenId ?? null,
      vocabSize: tok().vocabSize,
      length: tok().backendTokenizer.getVocabSize(true),
    }).toEqual(a);
  });

  test.each(want.encode.map((c, i) => [i, JSON.stringify(c.options), c] as const))('encode #%i %s', async (_i, _name, c) => {
    const batch = c.batch ?? expected.strings.length;
    const inputIds: number[][] = [];
    const attentionMask: number[][] = [];
    for (let start = 0; start < expected.strings.length; start += batch) {
      const out = await tok().encode(expected.strings.slice(start, start + batch), c.options);
      inputIds.push(...out.inputIds);
      attentionMask.push(...out.attentionMask);
    }
    const ids = expected.values[c.inputIds] as number[][];
    const mask = expected.values[c.attentionMask] as number[][];
    const differing = expected.strings.filter((_, i) => JSON.stringify(inputIds[i]) !== JSON.stringify(ids[i]));
    expect(differing).toEqual([]);
    expect(inputIds).toEqual(ids);
    expect(attentionMask).toEqual(mask);
  });

  test.each(want.decode.map((d) => [d.case, d.skipSpecialTokens, d] as const))('decode of encode #%i, skipSpecialTokens %s', async (_case, skip, d) => {
    const ids = expected.values[want.encode[d.case]!.inputIds] as number[][];
    const texts = expected.values[d.texts] as string[];
    expect(await tok().batchDecode(ids, { skipSpecialTokens: skip })).toEqual(texts);
    // one row through decode() too
    const row = expected.strings.indexOf('Hello, World!');
    expect(await tok().decode(ids[row]!, { skipSpecialTokens: skip })).toBe(texts[row]);
  });
});

test('CLIP truncation keeps <|endoftext|> last (CLIP pools at it); CLIP-L pads with it, CLIP-G with "!"', async () => {
  const long = expected.strings.filter((t) => t.startsWith('In a quiet village')).sort((a, b) => b.length - a.length)[0]!;
  for (const [folder, pad] of [['clip-l', 49407], ['clip-g', 0]] as const) {
    const tok = tokenizers.get(folder)!;
    const { inputIds, attentionMask } = await tok.encode([long, 'a photo of a cat'], { padding: 'max_length', maxLength: 77, truncation: true });
    expect(inputIds[0]).toHaveLength(77);
    expect([inputIds[0]![0], inputIds[0]![76]]).toEqual([49406, 49407]);
    expect(inputIds[1]!.slice(0, 7)).toEqual([49406, 320, 1125, 539, 320, 2368, 49407]);
    expect(new Set(inputIds[1]!.slice(7))).toEqual(new Set([pad]));
    expect(attentionMask[1]!.indexOf(0)).toBe(7);
  }
});

test('concurrent calls with different options each get their own padding and truncation', async () => {
  const tok = tokenizers.get('clip-l')!;
  const texts = expected.strings.slice(0, 40);
  const calls = [
    { padding: 'max_length', maxLength: 77, truncation: true },
    {},
    { padding: 'longest', truncation: true, maxLength: 16 },
  ] as const;
  const alone: unknown[] = [];
  for (const options of calls) alone.push(await tok.encode(texts, options));
  const together = await Promise.all([...calls, ...calls].map((options) => tok.encode(texts, options)));
  expect(together).toEqual([...alone, ...alone]);
});

describe('slow folders convert to the tokenizer transformers builds', () => {
  const converted = readJsonGz<Record<string, Record<string, unknown>>>('converted.json.gz');

  test.each(Object.keys(converted))('%s', (folder) => {
    const path = join(root, `${folder}.saved.json`);
    const backend = tokenizers.get(folder)!.backendTokenizer;
    // encode() leaves its last padding and truncation set; transformers' is read before any call
    backend.disablePadding();
    backend.disableTruncation();
    backend.save(path);
    const ours = JSON.parse(readFileSync(path, 'utf8')) as { model: Record<string, unknown>; normalizer: Record<string, unknown> | null };
    const vocab = ours.model.vocab;
    if (ours.model.type === 'BPE') {
      // CLIP: the vocabulary and merges are vocab.json's and merges.txt's
      expect(Object.keys(vocab as object)).toHaveLength(49408);
      expect(ours.model.merges).toHaveLength(48894);
      ours.model.vocab = {};
      ours.model.merges = [];
    } else {
      // T5: the charsmap is compared by its hash
      const charsmap = Buffer.from(ours.normalizer!.precompiled_charsmap as string, 'base64');
      ours.normalizer!.precompiled_charsmap = `sha256:${createHash('sha256').update(charsmap).digest('hex')}`;
    }
    expect(ours).toEqual(converted[folder]);
  });
});
