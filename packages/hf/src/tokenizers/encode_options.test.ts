// planEncode: transformers' rules for padding, truncation and the length they use.
import { expect, test } from 'vitest';
import { planEncode, type EncodeOptions } from './encode_options.js';

const clip = { modelMaxLength: 77, padToken: '<|endoftext|>', description: 'clip' };

test.each<[EncodeOptions | undefined, ReturnType<typeof planEncode>]>([
  [undefined, { padding: 'none', truncation: false, maxLength: undefined, addSpecialTokens: true }],
  [{}, { padding: 'none', truncation: false, maxLength: undefined, addSpecialTokens: true }],
  // maxLength alone truncates (transformers' backward-compatible default)
  [{ maxLength: 5 }, { padding: 'none', truncation: true, maxLength: 5, addSpecialTokens: true }],
  [{ maxLength: 5, truncation: false }, { padding: 'none', truncation: false, maxLength: undefined, addSpecialTokens: true }],
  [{ maxLength: 5, truncation: 'do_not_truncate' }, { padding: 'none', truncation: false, maxLength: undefined, addSpecialTokens: true }],
  // with padding 'longest' it does not, and maxLength is unused
  [{ maxLength: 5, padding: 'longest' }, { padding: 'longest', truncation: false, maxLength: undefined, addSpecialTokens: true }],
  [{ padding: true, truncation: true }, { padding: 'longest', truncation: true, maxLength: 77, addSpecialTokens: true }],
  [{ padding: 'max_length' }, { padding: 'max_length', truncation: false, maxLength: 77, addSpecialTokens: true }],
  [{ padding: 'max_length', maxLength: 10, truncation: 'longest_first' }, { padding: 'max_length', truncation: true, maxLength: 10, addSpecialTokens: true }],
  [{ padding: 'do_not_pad', truncation: 'only_first' }, { padding: 'none', truncation: true, maxLength: 77, addSpecialTokens: true }],
  [{ truncation: true, addSpecialTokens: false }, { padding: 'none', truncation: true, maxLength: 77, addSpecialTokens: false }],
])('%j', (options, plan) => {
  expect(planEncode(options, clip)).toEqual(plan);
});
