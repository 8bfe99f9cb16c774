// Every cross-package test but the packaging test, which has its own run (vitest.packaging.config.ts).
import { defineConfig } from 'vitest/config';
import base from '../vitest.config.base.ts';

export default defineConfig({ ...base, test: { ...base.test, exclude: [...(base.test?.exclude ?? []), 'packaging/**'] } });
