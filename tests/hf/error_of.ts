// The DTorchError a call throws, for tests that read its code and message; a call that throws
// nothing fails the test.
import type * as dt from '@dtorch/api';

export function errorOf(fn: () => unknown): dt.DTorchError {
  try {
    fn();
  } catch (err) {
    return err as dt.DTorchError;
  }
  throw new Error('expected an error');
}
