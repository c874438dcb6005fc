/** The `iot-operator` process: options from flags and environment, then run until SIGTERM/SIGINT. */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { serveConversionLocally } from './local-conversion.ts';
import { parseOperatorOptions } from './options.ts';
import { createIoTOperator } from './operator.ts';

const options = parseOperatorOptions(process.argv.slice(2));
const mgr = await createIoTOperator(options);
const releaseConversion = options.localConversion ? serveConversionLocally(mgr, readFileSync(path.join(options.localConversion.certDir, 'ca.crt'), 'utf8')) : undefined;
await mgr.runUntilSignal(releaseConversion);
