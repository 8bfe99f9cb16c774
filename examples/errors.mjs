#!/usr/bin/env node
// Bad input throws a DTorchError at the call, with a code and a message that says what was wrong,
// and records nothing; using a disposed tensor is an error too, not a crash.
//   node examples/errors.mjs
import * as dt from '@dtorch/api';
import { ErrorCode, isDTorchError } from '@dtorch/common'; // @dtorch/api re-exports both

function attempt(what, fn) {
  try {
    fn();
    console.log(`${what}: no error`);
  } catch (err) {
    if (!isDTorchError(err)) throw err;
    console.log(`${what}: ${err.code}: ${err.message.split('\n')[0]}`);
  }
}

attempt('a negative size', () => dt.zeros([-1]));
attempt('shapes that do not multiply', () => dt.ones([2, 3]).matmul(dt.ones([2, 3])));
const x = dt.ones([2]);
x.dispose();
attempt('a disposed tensor', () => x.add(1));
console.log('INVALID_ARGUMENT is', ErrorCode.InvalidArgument);
