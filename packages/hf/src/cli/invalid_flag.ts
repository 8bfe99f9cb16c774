// The error of a command-line flag that cannot be taken: INVALID_ARGUMENT with what was wrong.
import { DTorchError, ErrorCode } from '@dtorch/common';

/** A DTorchError (INVALID_ARGUMENT) saying what is wrong with a flag and how to fix it. */
export function invalid(message: string): DTorchError {
  return new DTorchError(ErrorCode.InvalidArgument, message);
}
