// What vitest makes of a repository's configuration, read at the base commit (before the
// patch) by the vitest runner (grader/box/runners/vitest.py):
//   node /abs/vitest-probe.mjs [CONFIG]      (cwd: the repository)
// It creates vitest the way `vitest run` does (its configuration evaluated, nothing run)
// and prints one JSON line: the configuration file, the repository files it was built
// from (vite bundles what it imports), and, per project, what vitest loads as modules
// around the tests (setup files, global setup, an environment), the alias targets, the
// pool and whether it runs in a browser. Nothing here speaks the report channel.

import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
const fs = require('fs');
const path = require('path');

const repo = process.cwd();
const configArg = process.argv[2] || undefined;

function vitestNode() {
  const root = path.join(repo, 'node_modules', 'vitest');
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  let entry = null;
  const exp = pkg.exports && pkg.exports['./node'];
  if (typeof exp === 'string') entry = exp;
  else if (exp && typeof exp === 'object') {
    const imp = exp.import;
    entry = typeof imp === 'string' ? imp : (imp && (imp.default || imp.node)) || exp.default || null;
  }
  return { version: pkg.version, file: path.join(root, entry || 'dist/node.js') };
}

function list(value) {
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value : [value];
}

function project(p) {
  const server = p.vite || p.server;
  const config = p.config || {};
  const vite = (server && server.config) || {};
  const alias = list(vite.resolve && vite.resolve.alias)
    .map((a) => (a && typeof a.replacement === 'string' ? a.replacement : null))
    .filter(Boolean);
  return {
    name: typeof config.name === 'string' ? config.name : '',
    configFile: vite.configFile || null,
    deps: list(vite.configFileDependencies),
    setupFiles: list(config.setupFiles),
    globalSetup: list(config.globalSetup),
    environment: typeof config.environment === 'string' ? config.environment : null,
    alias,
    pool: config.pool || null,
    browser: !!(config.browser && config.browser.enabled),
    typecheck: !!(config.typecheck && config.typecheck.enabled),
  };
}

const { version, file } = vitestNode();
const { createVitest } = await import(pathToFileURL(file).href);
const v = await createVitest('test', { run: true, watch: false, config: configArg }, {}, {});
const projects = [];
const seen = new Set();
for (const p of [v.getRootProject ? v.getRootProject() : (v.getCoreWorkspaceProject ? v.getCoreWorkspaceProject() : null), ...(v.projects || [])]) {
  if (!p || seen.has(p)) continue;
  seen.add(p);
  projects.push(project(p));
}
if (!projects.length) projects.push(project({ config: v.config, vite: v.vite, server: v.server }));
process.stdout.write('\n' + JSON.stringify({ version, projects }) + '\n');
await v.close();
process.exit(0);
