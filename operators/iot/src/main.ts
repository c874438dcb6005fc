/** The `iot-operator` process: options from flags and environment, then run until SIGTERM/SIGINT. */
import { ensureWebhookCertificate } from '@iot-operator/runtime';
import { serveConversionLocally } from './webhooks/local-conversion.ts';
import { parseOperatorOptions } from './options.ts';
import { createIoTOperator } from './operator.ts';

const options = parseOperatorOptions(process.argv.slice(2));
// --local-conversion: the certificate for 127.0.0.1 its webhook server serves, kept across runs.
const localCertificate = options.localConversion ? ensureWebhookCertificate(options.localConversion.certDir, ['IP:127.0.0.1']) : undefined;
const mgr = await createIoTOperator(options);
const releaseConversion = localCertificate ? serveConversionLocally(mgr, localCertificate.ca) : undefined;
await mgr.runUntilSignal(releaseConversion);
