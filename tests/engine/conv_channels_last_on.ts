// Imported first by conv_channels_last.test.ts: turns channels-last convolutions on (off by
// default) for that file's process before anything loads the addon, which reads its settings once.
process.env['DTORCH_CONV_CHANNELS_LAST'] = '1';
