import { describe, expect, test } from 'vitest';
import { median } from './median';

describe('median', () => {
  test('an odd-length list gives its middle value', () => {
    expect(median([3, 1, 2])).toBe(2);
  });

  test('an even-length list gives the mean of its middle pair', () => {
    const xs: number[] = [4, 1, 3, 2];
    expect(median(xs)).toBe(2.5);
  });
});
