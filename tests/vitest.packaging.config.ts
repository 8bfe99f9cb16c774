// The packaging test alone (tests/packaging): `npm run test:packaging` at the root, also part of `npm test`.
import { defineConfig } from 'vitest/config';
import base from '../vitest.config.base.ts';

export default defineConfig({ ...base, test: { ...base.test, include: ['packaging/**/*.test.ts'], testTimeout: 600_000 } });
