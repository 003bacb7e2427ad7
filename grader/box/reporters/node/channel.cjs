'use strict';
// The signed report channel (CONTRACT.md, the same as grader/report_plugin.py) for every
// Node.js reporter in this directory: tape-preload.cjs, node-test-reporter.mjs,
// mocha-reporter.cjs and jest-reporter.cjs require this one file.
//
// open() is called once per process, at load, before any test code runs. It
//  - reads the key (32 bytes) and the settings (JSON) from GRADER_KEY_FD with pread at
//    offset 0, so every process of a run can read it afresh, and closes that descriptor;
//  - removes GRADER_REPORT_FD and GRADER_KEY_FD from the environment (process.env is the
//    real environment in Node: children spawned later do not inherit them);
//  - reopens the report pipe through /proc/self/fd (Node opens every file O_CLOEXEC) and
//    closes the inherited descriptor, so processes the tests spawn do not get it either
//    (Node has no fcntl; where /proc is missing the inherited descriptor is kept);
//  - returns emit(record): one line `<json>\t<hmac>\n`, json with sorted keys plus the
//    session id "s", hmac = HMAC-SHA256(key, previous hmac hex + json).
// Everything emit() uses is taken at load (before test code could replace a global such
// as JSON.stringify or Hmac.prototype.update) and called through a captured Reflect.apply.

const fs = require('fs');
const crypto = require('crypto');

const apply = Reflect.apply;
const ownKeys = Object.keys;
const stringify = JSON.stringify;
const parse = JSON.parse;
const sort = Array.prototype.sort;
const join = Array.prototype.join;
const push = Array.prototype.push;
const replace = String.prototype.replace;
const charCodeAt = String.prototype.charCodeAt;
const numToString = Number.prototype.toString;
const padStart = String.prototype.padStart;
const createHmac = crypto.createHmac;
const randomBytes = crypto.randomBytes;
const hmacProto = Object.getPrototypeOf(crypto.createHmac('sha256', 'k'));
const hmacUpdate = hmacProto.update;
const hmacDigest = hmacProto.digest;
const bufFrom = Buffer.from;
const bufConcat = Buffer.concat;
const bufToString = Buffer.prototype.toString;
const bufSubarray = Buffer.prototype.subarray;
const readSync = fs.readSync;
const writeSync = fs.writeSync;
const openSync = fs.openSync;
const closeSync = fs.closeSync;
const O_WRONLY = fs.constants.O_WRONLY;
const env = process.env;
const getpid = () => process.pid;
const NON_ASCII = /[\u007f-\uffff]/g;

function escapeChar(c) {
  return '\\u' + apply(padStart, apply(numToString, apply(charCodeAt, c, [0]), [16]), [4, '0']);
}

// compact JSON with sorted keys, non-ASCII escaped (as Python's ensure_ascii): records are
// flat objects of strings, numbers and booleans
function canonical(record) {
  const keys = apply(sort, ownKeys(record), []);
  const parts = [];
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    const v = record[k];
    apply(push, parts, [stringify(k) + ':' + (v === undefined ? 'null' : stringify(v))]);
  }
  return apply(replace, '{' + apply(join, parts, [',']) + '}', [NON_ASCII, escapeChar]);
}

let opened = false;

function readKey(keyFd) {
  const chunks = [];
  let off = 0;
  const buf = Buffer.alloc(65536);
  for (;;) {
    const n = readSync(keyFd, buf, 0, buf.length, off);
    if (!n) break;
    apply(push, chunks, [bufFrom(apply(bufSubarray, buf, [0, n]))]);
    off += n;
  }
  closeSync(keyFd);
  return bufConcat(chunks);
}

// One caller per process gets the emitter: the reporter, which calls open() at load,
// before any test code; a second call (code that found this file) gets an error.
function open() {
  if (opened) throw new Error('grader reporter: the report channel is already open');
  const repText = env.GRADER_REPORT_FD;
  const keyText = env.GRADER_KEY_FD;
  delete env.GRADER_REPORT_FD;
  delete env.GRADER_KEY_FD;
  if (repText === undefined || keyText === undefined) {
    throw new Error('grader reporter: GRADER_REPORT_FD / GRADER_KEY_FD are not set');
  }
  const secret = readKey(Number(keyText));
  const key = bufFrom(apply(bufSubarray, secret, [0, 32]));
  const rest = apply(bufToString, apply(bufSubarray, secret, [32]), ['utf8']);
  const settings = rest ? parse(rest) : {};
  let fd = Number(repText);
  try {
    const again = openSync('/proc/self/fd/' + fd, O_WRONLY);
    closeSync(fd);
    fd = again;
  } catch (e) {
    // no /proc: keep the inherited descriptor
  }
  const session = apply(bufToString, randomBytes(8), ['hex']);
  let prev = bufFrom('');
  let closed = false;

  function emit(record) {
    if (closed) return;
    const rec = {};
    const keys = ownKeys(record);
    for (let i = 0; i < keys.length; i++) rec[keys[i]] = record[keys[i]];
    rec.s = session;
    const line = canonical(rec);
    const h = createHmac('sha256', key);
    apply(hmacUpdate, h, [prev]);
    apply(hmacUpdate, h, [line, 'utf8']);
    const mac = apply(hmacDigest, h, ['hex']);
    prev = bufFrom(mac, 'latin1');
    let data = bufFrom(line + '\t' + mac + '\n', 'utf8');
    while (data.length) {
      const n = writeSync(fd, data, 0, data.length);
      data = apply(bufSubarray, data, [n]);
    }
    if (record.t === 'end') closed = true;
  }

  emit({ t: 'start', pid: getpid() });
  closeInspector();
  opened = true;
  return { emit, settings, session };
}

// The inspector is the way for code in this process to read the key out of emit's closure
// (Runtime.getProperties on [[Scopes]]). Before any test code runs: inspector sessions
// cannot connect, process.binding('inspector') is refused and process._debugProcess is gone.
// What is left: a SIGUSR1 (process.kill(process.pid, 'SIGUSR1')) still opens node's inspector
// on 127.0.0.1:9229, which code here could then speak WebSocket to by hand.
function closeInspector() {
  const refuse = function () { throw new Error('the inspector is not available under the grader'); };
  for (const name of ['inspector', 'inspector/promises']) {
    let mod = null;
    try { mod = require(name); } catch (e) { continue; }
    if (mod && mod.Session && mod.Session.prototype) {
      for (const m of ['connect', 'connectToMainThread']) {
        try { Object.defineProperty(mod.Session.prototype, m, { value: refuse, writable: false, configurable: false }); } catch (e) { /* */ }
      }
    }
    for (const m of ['open', 'url']) {
      try { Object.defineProperty(mod, m, { value: refuse, writable: false, configurable: false }); } catch (e) { /* */ }
    }
  }
  const binding = process.binding;
  if (typeof binding === 'function') {
    const guarded = function (name) {
      if (String(name) === 'inspector') refuse();
      return apply(binding, process, arguments);
    };
    try { Object.defineProperty(process, 'binding', { value: guarded, writable: false, configurable: false }); } catch (e) { /* */ }
  }
  try { Object.defineProperty(process, '_debugProcess', { value: refuse, writable: false, configurable: false }); } catch (e) { /* */ }
  // a JavaScript SIGUSR1 listener replaces node's start-the-inspector handler
  try { process.on('SIGUSR1', function () {}); } catch (e) { /* */ }
}

// A snapshot of the functions on some objects (a runner's prototypes): check() names every
// one that was replaced or removed since, which is how test code would bend a runner's
// outcomes from inside the process.
function snapshot(targets) {
  const saved = [];
  const tnames = ownKeys(targets);
  for (let i = 0; i < tnames.length; i++) {
    const obj = targets[tnames[i]];
    if (!obj) continue;
    const names = Object.getOwnPropertyNames(obj);
    for (let j = 0; j < names.length; j++) {
      const d = Object.getOwnPropertyDescriptor(obj, names[j]);
      if (d && typeof d.value === 'function') apply(push, saved, [[tnames[i], obj, names[j], d.value]]);
    }
  }
  return function check() {
    const changed = [];
    for (let i = 0; i < saved.length; i++) {
      const [tname, obj, name, fn] = saved[i];
      const d = Object.getOwnPropertyDescriptor(obj, name);
      if (!d || d.value !== fn) apply(push, changed, [tname + '.' + name]);
    }
    return changed;
  };
}

// Test ids must be unique within a session (a repeated one reads as forgery): a name seen
// before in the same file gets " [2]", " [3]", ...
function uniqueIds() {
  const seen = new Map();
  return function unique(id) {
    const n = (seen.get(id) || 0) + 1;
    seen.set(id, n);
    return n === 1 ? id : id + ' [' + n + ']';
  };
}

function relPath(file, cwd) {
  if (!file) return '?';
  let f = String(file);
  if (f.startsWith('file://')) f = require('url').fileURLToPath(f);
  const base = (cwd || process.cwd()) + '/';
  return f.startsWith(base) ? f.slice(base.length) : f;
}

// Processes the tests fork (child_process.fork() passes process.execArgv on) must not load
// the reporters again: they would find no channel. Drop from process.execArgv every flag
// that names a file of this directory (-r/--require/--import and their value) and, with
// dropReporters, node's --test-reporter / --test-reporter-destination flags.
function dropOwnExecArgv(dropReporters) {
  const dir = __dirname + '/';
  const argv = process.execArgv;
  const keep = [];
  for (let i = 0; i < argv.length; i++) {
    const a = String(argv[i]);
    const next = i + 1 < argv.length ? String(argv[i + 1]) : '';
    if ((a === '-r' || a === '--require' || a === '--import' || a === '--loader') && next.includes(dir)) { i++; continue; }
    if (a.includes(dir)) continue;
    if (dropReporters && (a === '--test-reporter' || a === '--test-reporter-destination')) { i++; continue; }
    if (dropReporters && (a.startsWith('--test-reporter=') || a.startsWith('--test-reporter-destination='))) continue;
    keep.push(a);
  }
  argv.length = 0;
  for (const a of keep) argv.push(a);
}

module.exports = { open, snapshot, uniqueIds, relPath, canonical, dropOwnExecArgv };
