/** The `iot-operator` process: options from flags and environment, then run until SIGTERM/SIGINT. */
import { parseOperatorOptions } from './options.ts';
import { createIoTOperator } from './operator.ts';

const options = parseOperatorOptions(process.argv.slice(2));
const mgr = await createIoTOperator(options);
await mgr.runUntilSignal();
