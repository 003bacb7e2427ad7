require('../nope');
test('never', () => {});
