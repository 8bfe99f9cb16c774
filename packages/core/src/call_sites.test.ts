import { describe, expect, it } from 'vitest';
import { CallSites } from './call_sites.js';

function recordFromUserCode(sites: CallSites, seq: number): void {
  sites.capture(seq);
}

describe('CallSites', () => {
  it('returns the frames of the call that recorded a sequence number', () => {
    const sites = new CallSites(true, 8, /node_modules/);
    recordFromUserCode(sites, 3);
    const text = sites.describe(3);
    expect(text).toContain('recordFromUserCode');
    expect(text).toContain('call_sites.test.ts');
    expect(text).not.toContain('node_modules');
  });

  it('says when a site is too old to be kept, or when capture is off', () => {
    const sites = new CallSites(true, 4);
    recordFromUserCode(sites, 1);
    recordFromUserCode(sites, 5); // same slot as 1
    expect(sites.describe(1)).toContain('recorded too long ago');
    const off = new CallSites(false, 4);
    off.capture(2);
    expect(off.describe(2)).toContain('DTORCH_CAPTURE_STACKS=0');
  });
});
