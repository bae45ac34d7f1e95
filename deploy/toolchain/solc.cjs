#!/usr/bin/env node
// resolvd's `solc` command-line shim over solcjs (npm `solc`), for forge.
//
// forge cannot download a native solc here, so bootstrap.sh installs solcjs and
// copies this file to .tools/bin/solc. forge needs exactly two things of it:
//   solc --version            -> two lines, the second `Version: <version>`
//   solc --standard-json ...  -> standard JSON in on stdin, out on stdout, with
//                                imports resolved against --base-path /
//                                --include-path and the working directory.
// --allow-paths and any other flag is accepted and ignored.
'use strict';

const fs = require('fs');
const path = require('path');

const solc = require(path.join(__dirname, '..', 'npm', 'node_modules', 'solc'));

const args = process.argv.slice(2);

if (args.includes('--version')) {
  process.stdout.write(`solc, the solidity compiler commandline interface\nVersion: ${solc.version()}\n`);
  process.exit(0);
}

if (!args.includes('--standard-json')) {
  process.stderr.write('resolvd solc shim: only --version and --standard-json are supported\n');
  process.exit(2);
}

// Collect import roots from `--flag value` and `--flag=value` forms.
const roots = [];
for (let i = 0; i < args.length; i++) {
  for (const flag of ['--base-path', '--include-path']) {
    if (args[i] === flag && i + 1 < args.length) roots.push(args[++i]);
    else if (args[i].startsWith(flag + '=')) roots.push(args[i].slice(flag.length + 1));
  }
}
roots.push(process.cwd());

function findImports(importPath) {
  const candidates = path.isAbsolute(importPath)
    ? [importPath]
    : roots.map((root) => path.resolve(root, importPath));
  for (const file of candidates) {
    if (fs.existsSync(file) && fs.statSync(file).isFile()) {
      return { contents: fs.readFileSync(file, 'utf8') };
    }
  }
  return { error: `File not found: ${importPath} (searched ${roots.join(', ')})` };
}

const input = fs.readFileSync(0, 'utf8');
process.stdout.write(solc.compile(input, { import: findImports }));
