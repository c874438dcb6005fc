/**
 * The device simulator's command line:
 *   node --import tsx src/simulator/main.ts --core URL --gateway-http URL --gateway-mqtt URL
 *        [--token TOKEN | IOT_API_TOKEN] [--messages M] [--device ID] [--timeout SECONDS]
 *        [--ca FILE] [--servername NAME]
 * The gateway URLs may be mqtts:// and https://: `--ca` names the PEM file of the CA to trust
 * (e.g. the instance's ConfigMap gateway-ca), `--servername` the name its certificate must cover
 * when the URL dials an IP.
 *
 * Guarantees: runs `simulateDevice` with the given addresses (nothing is assumed about where the
 * service runs); the last line of output is `device <id>: sent <n>, stored <n>`; exit 0 when every
 * sent message was stored, 1 when not or on an error (printed), 2 on a usage error.
 */

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { simulateDevice } from './index.ts';

const usage =
  'usage: simulator --core URL --gateway-http URL --gateway-mqtt URL [--token TOKEN] [--messages M] [--device ID] [--timeout SECONDS] [--ca FILE] [--servername NAME]\n' +
  '  the api token comes from --token or IOT_API_TOKEN';

let args;
try {
  args = parseArgs({
    options: {
      core: { type: 'string' },
      'gateway-http': { type: 'string' },
      'gateway-mqtt': { type: 'string' },
      token: { type: 'string' },
      messages: { type: 'string', default: '10' },
      device: { type: 'string' },
      timeout: { type: 'string', default: '60' },
      ca: { type: 'string' },
      servername: { type: 'string' },
    },
    strict: true,
  }).values;
} catch (error) {
  console.error(`${(error as Error).message}\n${usage}`);
  process.exit(2);
}

const apiToken = args.token ?? process.env.IOT_API_TOKEN;
const messages = Number(args.messages);
const timeout = Number(args.timeout);
if (!args.core || !args['gateway-http'] || !args['gateway-mqtt'] || !apiToken || !Number.isInteger(messages) || messages < 0 || !(timeout > 0)) {
  console.error(usage);
  process.exit(2);
}

try {
  const gatewayTls = args.ca !== undefined || args.servername !== undefined ? { ca: args.ca === undefined ? undefined : readFileSync(args.ca, 'utf8'), servername: args.servername } : undefined;
  const report = await simulateDevice(
    { coreUrl: args.core, gatewayHttpUrl: args['gateway-http'], gatewayMqttUrl: args['gateway-mqtt'], apiToken, gatewayTls },
    { deviceId: args.device, messages, timeoutMs: timeout * 1000 },
  );
  console.log(`mqtt ${report.sent.mqtt}, http ${report.sent.http}, all stored after ${report.elapsedMs} ms: ${report.stored >= report.sent.total}`);
  console.log(`device ${report.deviceId}: sent ${report.sent.total}, stored ${report.stored}`);
  process.exit(report.stored >= report.sent.total ? 0 : 1);
} catch (error) {
  console.error(`simulator: ${(error as Error).message}`);
  process.exit(1);
}
