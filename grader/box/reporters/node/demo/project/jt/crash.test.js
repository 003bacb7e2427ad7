test('first', () => {});
test('exits', () => { process.exit(0); });
test('after', () => {});
