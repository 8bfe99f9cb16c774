// Imported first by matmul_tuning.test.ts: turns the timed matmuls on (off by default) for that
// file's process before anything loads the addon, which reads its settings once.
process.env['DTORCH_MATMUL_TUNING'] = '1';
