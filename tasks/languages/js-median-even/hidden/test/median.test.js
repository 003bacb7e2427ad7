'use strict';
const { describe, test } = require('node:test');
const assert = require('node:assert');
const { median } = require('..');

describe('median', () => {
  test('an odd-length list gives its middle value', () => {
    assert.strictEqual(median([3, 1, 2]), 2);
  });

  test('an even-length list gives the mean of its middle pair', () => {
    assert.strictEqual(median([4, 1, 3, 2]), 2.5);
  });
});
