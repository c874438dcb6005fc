// Loaded into a package script's process by scripts/package-script.ts (npm's node-options): the
// script's writes through fs.writeFileSync and fs/promises writeFile are recorded instead of made,
// and at exit the record (absolute path → text) is written as JSON to GENERATE_CAPTURE_FILE, so
// a package script's generator can be run without touching the files it generates.
import fs from 'node:fs';
import fsPromises from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const captureFile = process.env.GENERATE_CAPTURE_FILE;
if (!captureFile) throw new Error('capture-writes.mjs needs GENERATE_CAPTURE_FILE');
const write = fs.writeFileSync;
const written = {};
const record = (file, data) => {
  written[path.resolve(file instanceof URL ? fileURLToPath(file) : String(file))] = Buffer.from(data).toString('utf8');
};
fs.writeFileSync = record;
fsPromises.writeFile = async (file, data) => record(file, data);
syncBuiltinESMExports();
process.on('exit', () => write(captureFile, JSON.stringify(written)));
