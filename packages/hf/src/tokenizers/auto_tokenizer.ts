// AutoTokenizer.fromPretrained: a tokenizer folder (a save_pretrained output, a hub repository's
// tokenizer/ subfolder, ...) to a PreTrainedTokenizer, built as transformers' AutoTokenizer
// builds it: CLIPTokenizer and T5Tokenizer from their class code and the vocabulary (of
// tokenizer.json, else of the slow files), any other class from tokenizer.json as it is; then the
// config's special tokens added, then the class's post-processor.
import { readFile } from 'node:fs/promises';
import { AddedToken, Tokenizer } from 'tokenizers';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { openRepo, type RepoFiles } from '@dtorch/external';
import { checkPretrainedOptions, inSubfolder, repoOptions, type SourceOptions } from '../loading/options.js';
import type { AddedTokenSpec } from './added_token.js';
import { PreTrainedTokenizer } from './pretrained_tokenizer.js';
import { namedSpecialTokens, specialTokensToAdd } from './special_tokens.js';
import type { Backend, TokenizerClass } from './tokenizer_class.js';
import { slowTokenizerClasses, tokenizerClassNamed } from './tokenizer_classes.js';
import { readTokenizerConfig, type TokenizerConfig } from './tokenizer_config.js';
import { addedTokensOf, parseTokenizerJson, sideOf } from './tokenizer_json.js';

const TOKENIZER_FILE = 'tokenizer.json';
const CONFIG_FILE = 'tokenizer_config.json';
const SPECIAL_TOKENS_MAP_FILE = 'special_tokens_map.json';
/** Files of slow (Python-only) tokenizers, named when a folder has no tokenizer.json. */
const SLOW_FILES = ['vocab.json', 'merges.txt', 'vocab.txt', 'spiece.model', 'sentencepiece.bpe.model', 'tokenizer.model', 'added_tokens.json'];

/** Loads a saved tokenizer as transformers' AutoTokenizer: AutoTokenizer.fromPretrained(source). */
export class AutoTokenizer {
  /**
   * The tokenizer of `source`: a local folder, or a hub id "org/name" (through the HF cache).
   * Reads tokenizer.json, tokenizer_config.json and special_tokens_map.json, or the slow files
   * of a CLIP (vocab.json + merges.txt) or T5 (spiece.model) tokenizer.
   */
  static async fromPretrained(source: string, options?: SourceOptions): Promise<PreTrainedTokenizer> {
    const o = checkPretrainedOptions<SourceOptions>('AutoTokenizer.fromPretrained', options);
    const repo = await openRepo(source, repoOptions(o));
    const prefix = inSubfolder(o.subfolder, '');
    const description = `${repo.description}${prefix ? ` (subfolder ${prefix.slice(0, -1)})` : ''}`;
    const files = new TokenizerFiles(repo, prefix);

    const config = readTokenizerConfig(await files.json(CONFIG_FILE), await files.json(SPECIAL_TOKENS_MAP_FILE), {
      config: files.name(CONFIG_FILE),
      specialTokensMap: files.name(SPECIAL_TOKENS_MAP_FILE),
    });
    const tokenizerClass = tokenizerClassNamed(config.tokenizerClass);
    const jsonText = files.has(TOKENIZER_FILE) ? await files.text(TOKENIZER_FILE) : undefined;
    const json = jsonText === undefined ? undefined : parseTokenizerJson(jsonText, files.name(TOKENIZER_FILE));
    const named = namedSpecialTokens(config, tokenizerClass?.specialTokenDefaults ?? {}, json?.padding?.pad_token);

    // the backend, the added tokens it has already, the extra special tokens its files bring
    let built: { backend: Backend; text?: string; existing: AddedTokenSpec[]; extra: readonly AddedTokenSpec[] };
    if (json !== undefined && tokenizerClass !== undefined) {
      built = { backend: tokenizerClass.fromTokenizerJson(json, named, files.name(TOKENIZER_FILE)), existing: [], extra: [] };
    } else if (json !== undefined) {
      const existing = addedTokensOf(json).map((d) => d.token);
      built = { backend: { json }, text: jsonText, existing, extra: [] };
    } else {
      const { extraSpecialTokens, ...backend } = await fromSlowFiles(files, config, named, tokenizerClass, description);
      built = { backend, existing: [], extra: extraSpecialTokens };
    }
    // configs without added_tokens_decoder (the older layout): transformers takes tokenizer.json's added tokens
    const decoder = (config.addedTokensDecoder ?? (json ? addedTokensOf(json) : [])).map((d) => d.token);
    const extra = config.extraSpecialTokens ?? [...built.extra, ...(tokenizerClass?.defaultExtraSpecialTokens(config) ?? [])];

    const backend = loadBackend(built.text ?? JSON.stringify(built.backend.json), json === undefined ? 'the tokenizer built from the slow files' : files.name(TOKENIZER_FILE));
    if (built.backend.model !== undefined) backend.setModel(built.backend.model);
    const toAdd = specialTokensToAdd(decoder, named, extra, built.existing);
    if (toAdd.length > 0) backend.addAddedTokens(toAdd.map(nativeAddedToken));
    if (tokenizerClass !== undefined) backend.setPostProcessor(tokenizerClass.postProcessor(backend, named));

    return new PreTrainedTokenizer({
      backend,
      description,
      tokenizerClass: config.tokenizerClass,
      modelMaxLength: config.modelMaxLength,
      paddingSide: config.paddingSide ?? sideOf(json?.padding?.direction) ?? 'right',
      truncationSide: config.truncationSide ?? sideOf(json?.truncation?.direction) ?? 'right',
      specialTokens: named,
      cleanUpTokenizationSpaces: config.cleanUpTokenizationSpaces,
      cleanUpBpe: config.cleanUpBpe,
      isBpe: built.backend.json.model.type === 'BPE',
      cleanDecoded: tokenizerClass?.cleanDecoded,
    });
  }
}

/** The tokenizer's files inside the repository (under the subfolder), fetched when asked for. */
class TokenizerFiles {
  constructor(
    readonly repo: RepoFiles,
    readonly prefix: string,
  ) {}

  name(file: string): string {
    return `${this.repo.description}/${this.prefix}${file}`;
  }

  has(file: string): boolean {
    return this.repo.has(this.prefix + file);
  }

  async bytes(file: string): Promise<Uint8Array> {
    const [path] = await this.repo.fetch([this.prefix + file]);
    return readFile(path!);
  }

  async text(file: string): Promise<string> {
    return new TextDecoder('utf-8').decode(await this.bytes(file));
  }

  /** The parsed JSON file, or undefined when the repository has none. */
  async json(file: string): Promise<unknown> {
    if (!this.has(file)) return undefined;
    const text = await this.text(file);
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new DTorchError(ErrorCode.BadFile, `${this.name(file)} is not valid JSON (${(error as Error).message})`);
    }
  }

  /** The files under the subfolder (not deeper), for messages. */
  listed(): string[] {
    return this.repo
      .list()
      .filter((p) => p.startsWith(this.prefix) && !p.slice(this.prefix.length).includes('/'))
      .map((p) => p.slice(this.prefix.length));
  }
}

async function fromSlowFiles(
  files: TokenizerFiles,
  config: TokenizerConfig,
  named: ReadonlyMap<string, AddedTokenSpec>,
  tokenizerClass: TokenizerClass | undefined,
  description: string,
): Promise<Backend & { extraSpecialTokens: AddedTokenSpec[] }> {
  if (tokenizerClass !== undefined && tokenizerClass.slowFiles.every((f) => files.has(f))) {
    const contents = await Promise.all(tokenizerClass.slowFiles.map((f) => files.bytes(f)));
    return tokenizerClass.fromSlowFiles(contents, config, named, tokenizerClass.slowFiles.map((f) => files.name(f)));
  }
  const present = files.listed();
  const slow = present.filter((f) => SLOW_FILES.includes(f));
  const convertible = slowTokenizerClasses()
    .map((c) => `${c.name} (${c.slowFiles.join(' + ')})`)
    .join(' or ');
  const found = slow.length > 0 ? `the slow tokenizer files ${slow.join(', ')}` : `no slow tokenizer files (it holds ${present.length > 0 ? present.join(', ') : 'nothing'})`;
  const why =
    tokenizerClass !== undefined
      ? `${tokenizerClass.name} needs ${tokenizerClass.slowFiles.join(' + ')}`
      : config.tokenizerClass !== undefined
        ? `its ${CONFIG_FILE} names ${config.tokenizerClass}, and only ${convertible} can be converted here`
        : `${files.has(CONFIG_FILE) ? `its ${CONFIG_FILE} names no tokenizer_class` : `it has no ${CONFIG_FILE} to name the tokenizer class`}, and only ${convertible} can be converted here`;
  throw new DTorchError(
    ErrorCode.NotFound,
    `${description} has no ${TOKENIZER_FILE}, and ${found}; ${why}. ` +
      `Give a folder with ${TOKENIZER_FILE} (Python: AutoTokenizer.from_pretrained(path).save_pretrained(path) writes it)`,
  );
}

/** `token` as a tokenizers AddedToken, for the backend. */
function nativeAddedToken(token: AddedTokenSpec): AddedToken {
  return new AddedToken(token.content, token.special, {
    singleWord: token.singleWord,
    leftStrip: token.lstrip,
    rightStrip: token.rstrip,
    normalized: token.normalized,
  });
}

function loadBackend(text: string, what: string): Tokenizer {
  try {
    return Tokenizer.fromString(text);
  } catch (error) {
    throw new DTorchError(ErrorCode.BadFile, `tokenizers could not load ${what}: ${(error as Error).message}`);
  }
}
